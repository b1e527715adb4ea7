/**
 * CLI for API keys, on the same database the server uses (a change here applies from the server's
 * next request, through its key cache's change poll, ../auth/key-verifier.ts; with `[cluster]
 * redis_url`, `update` and `revoke` also publish it to every replica at once):
 *   key create --user EMAIL [--name N] [--expires 30d|12h|2027-01-01] [KEY POLICY FLAGS]
 *   key update KEY_ID|KEY [KEY POLICY FLAGS]
 *   key list [--user EMAIL] [--json] | key revoke KEY_ID|KEY
 * KEY POLICY FLAGS (../auth/key-policy.ts): --models "llama*,qwen3:*", --budget 5/day,
 * --per-minute N, --tokens-per-minute N, --allow-ip 10.0.0.0/8,192.168.1.7; an empty value clears.
 * `key create` prints the key alone on stdout (shown this once); notes go to stderr. A key pasted
 * in place of an id is looked up by its hash and never printed back.
 */
import { command, type CliContext } from "./registry";
import { requireFlag, stringFlag, UsageError, type Args } from "./args";
import { formatTable, printable } from "./table";
import { KEY_NAME_MAX_CHARS, KEY_PREFIX, keyNameTooLong, keyState, listApiKeys, revokeApiKey } from "../auth/apikey";
import { describePolicy, parsePolicyFlags, type PolicyChange } from "../auth/key-policy";
import { createKeyWithinCap, resolveKeyId, updateKeyPolicy } from "../auth/key-updates";
import { DEFAULT_KEYS_PER_USER } from "../config/limits-schema";
import { resolveEnvIfSet } from "../config/secrets";
import { publishKeyChange } from "../cluster";
import { date, requireUser, withDb } from "./users";
import { parseExpiry } from "./expiry";

const POLICY_FLAGS = ["models", "budget", "per-minute", "tokens-per-minute", "allow-ip"] as const;
const USAGE =
  "usage: modelgate key create --user EMAIL [--name N] [--expires 30d] [--models GLOBS] [--budget 5/day] [--per-minute N] [--tokens-per-minute N] [--allow-ip CIDRS] | key update KEY_ID|KEY [those policy flags] | key list [--user EMAIL] | key revoke KEY_ID|KEY";

function policyFromArgs(args: Args): PolicyChange {
  const change = parsePolicyFlags({
    models: stringFlag(args, "models"),
    budget: stringFlag(args, "budget"),
    perMinute: stringFlag(args, "per-minute"),
    tokensPerMinute: stringFlag(args, "tokens-per-minute"),
    allowIp: stringFlag(args, "allow-ip"),
  });
  if ("error" in change) throw new UsageError(change.error);
  return change;
}

/** `[limits] keys_per_user` as the config file writes it (serve checks its form at start), else the default. */
function keysPerUser(ctx: CliContext): number {
  const limits = ctx.rawConfig().limits as { keys_per_user?: unknown } | undefined;
  const cap = limits?.keys_per_user;
  return typeof cap === "number" && Number.isInteger(cap) && cap >= 1 ? cap : DEFAULT_KEYS_PER_USER;
}

/** The key's id from an id or the key itself; the operand is named in the error only when it is an id. */
async function requireKeyId(ctx: CliContext, operand: string): Promise<string> {
  const id = await withDb(ctx, (db) => resolveKeyId(db, operand));
  if (id !== null) return id;
  const what = operand.startsWith(KEY_PREFIX) ? "that key (checked by its hash)" : `the id ${operand}`;
  throw new UsageError(`no API key with ${what} in ${ctx.databaseFile()} (see: modelgate key list)`);
}

/** Publishes a key change to the replicas when the config names Redis; a failure is a note, the change is made. */
async function announceKeyChange(ctx: CliContext): Promise<void> {
  const cluster = ctx.rawConfig().cluster as { redis_url?: unknown; redis_timeout_ms?: unknown } | undefined;
  if (cluster?.redis_url === undefined) return;
  const url = resolveEnvIfSet(cluster.redis_url, "cluster.redis_url", process.env);
  const timeoutMs = typeof cluster.redis_timeout_ms === "number" ? cluster.redis_timeout_ms : 1_000;
  try {
    if (typeof url !== "string") throw new Error("cluster.redis_url names an unset variable");
    await publishKeyChange(url, { timeoutMs });
  } catch (error) {
    console.error(
      `note: the change is saved, but could not be published through Redis (${(error as Error).message}); replicas sharing this database see it within a moment through its change poll`,
    );
  }
}

export const keyCommand = command(
  async (ctx) => {
    const [, sub, operand] = ctx.args.positionals;
    if (sub === "create") {
      const email = requireFlag(ctx.args, "user");
      const now = Date.now();
      const expires = stringFlag(ctx.args, "expires");
      const expiresAt = expires === undefined ? null : parseExpiry(expires, now);
      const policy = policyFromArgs(ctx.args);
      const name = stringFlag(ctx.args, "name") ?? "default";
      // As the dashboard does: a longer name is refused, not cut (the cut would be a name nobody typed).
      if (keyNameTooLong(name)) throw new UsageError(`--name: at most ${KEY_NAME_MAX_CHARS} characters`);
      const cap = keysPerUser(ctx);
      const created = await withDb(ctx, async (db) => {
        const userId = (await requireUser(db, email, ctx)).id;
        return createKeyWithinCap(db, { userId, name, expiresAt, policy, now }, { keysPerUser: cap });
      });
      if (created === null) {
        console.error(`${email} has ${cap} active keys, the most one user may hold ([limits] keys_per_user): revoke one first`);
        return 1;
      }
      ctx.print(created.key);
      console.error(
        `created ${created.id} "${printable(created.name)}" for ${email}${expiresAt === null ? ", no expiry" : `, expires ${date(expiresAt)}`}. Store the key now: it is not shown again.`,
      );
      return 0;
    }
    if (sub === "update" && operand) {
      const change = policyFromArgs(ctx.args);
      if (Object.keys(change).length === 0) throw new UsageError(`key update: give at least one of ${POLICY_FLAGS.map((f) => `--${f}`).join(", ")}`);
      const id = await requireKeyId(ctx, operand);
      const key = await withDb(ctx, async (db) => {
        await updateKeyPolicy(db, id, change);
        return (await listApiKeys(db)).find((k) => k.id === id);
      });
      await announceKeyChange(ctx);
      ctx.print(`updated ${id}: ${key ? describePolicy(key) : "-"}`);
      return 0;
    }
    if (sub === "list") {
      const email = stringFlag(ctx.args, "user");
      const keys = await withDb(ctx, async (db) => listApiKeys(db, { userId: email === undefined ? undefined : (await requireUser(db, email, ctx)).id }));
      if (ctx.args.flags.has("json")) {
        ctx.print(JSON.stringify(keys, null, 2));
        return 0;
      }
      const rows = keys.map((k) => [
        k.id,
        k.email,
        k.name,
        `${k.displayPrefix}...`,
        date(k.createdAt),
        date(k.expiresAt),
        date(k.lastUsedAt),
        k.revokedAt === null ? keyState(k, Date.now()) : `revoked ${date(k.revokedAt)}`,
        describePolicy(k),
      ]);
      for (const line of formatTable([["ID", "USER", "NAME", "PREFIX", "CREATED", "EXPIRES", "LAST USED", "STATUS", "POLICY"], ...rows])) ctx.print(line);
      return 0;
    }
    if (sub === "revoke" && operand) {
      const id = await requireKeyId(ctx, operand);
      const result = await withDb(ctx, (db) => revokeApiKey(db, id));
      if (result === "revoked") await announceKeyChange(ctx);
      ctx.print(result === "revoked" ? `revoked ${id}` : `${id} was already revoked`);
      return 0;
    }
    throw new UsageError(USAGE);
  },
  {
    create: { flags: ["user", "name", "expires", ...POLICY_FLAGS], words: 2 },
    update: { flags: [...POLICY_FLAGS], words: 3 },
    list: { flags: ["user", "json"], words: 2 },
    revoke: { flags: [], words: 3 },
  },
);
