/**
 * CLI for users and credits, on the same database the server uses (WAL + busy timeout make that
 * safe while it runs; API keys are ./keys.ts):
 *   user add EMAIL [--admin] [--password-stdin] | user disable EMAIL | user enable EMAIL
 *   credits grant --user EMAIL --amount 12.50 [--note TEXT] | credits balance --user EMAIL
 * `user disable` ends the user's sessions and stops their keys from the server's next request;
 * `user enable` lets the keys work again.
 */
import { strictUtf8 } from "../config/text-file";
import { OTHER_DATA_DIR, command, type CliContext } from "./registry";
import { requireFlag, stringFlag, UsageError } from "./args";
import type { Db } from "../db/client";
import { createUser, disableUser, enableUser, findUserByEmail, findUserByStoredEmail, proveEmail, setAdmin, setPassword, type User } from "../auth/users";
import { passwordProblem } from "../auth/password";
import { deleteUserSessions } from "../auth/session";
import { AMOUNT_RULE, formatCredits, parseCredits, PAST_MAX_BALANCE } from "../credits/amount";
import { getBalance, grantCredits } from "../credits/ledger";

/** Runs `work` on the database and closes it once `work` has finished (awaited). */
export async function withDb<T>(ctx: CliContext, work: (db: Db) => T | Promise<T>): Promise<T> {
  const opened = await ctx.openDb();
  try {
    return await work(opened.db);
  } finally {
    await opened.close();
  }
}

/**
 * The user, or a usage error naming the database looked in: run elsewhere, a relative data_dir is
 * another one. An email typed exactly as stored comes first, so that an account whose stored form
 * is stuck (reported at start) can still be disabled or fixed by the address the warning shows.
 */
export async function requireUser(db: Db, email: string, ctx: Pick<CliContext, "databaseFile">): Promise<User> {
  const user = (await findUserByStoredEmail(db, email)) ?? (await findUserByEmail(db, email));
  if (!user) {
    throw new UsageError(`no user with the email ${email} in ${ctx.databaseFile()} (create one with: modelgate user add ${email}; ${OTHER_DATA_DIR})`);
  }
  return user;
}

/** How a user made without a password gets in: the sign-ins the config names, else API keys alone. */
function withoutPassword(ctx: Pick<CliContext, "rawConfig">): string {
  const auth = ctx.rawConfig().auth as Record<string, unknown> | undefined;
  const providers = [
    ["github", "GitHub"],
    ["google", "Google"],
  ]
    .filter(([key]) => auth?.[key] !== undefined)
    .map(([, name]) => name);
  const keys = "modelgate key create gives them API keys; modelgate user password EMAIL sets one";
  return providers.length === 0
    ? `no sign-in is configured ([auth.github] or [auth.google]): ${keys}`
    : `sign in with ${providers.join(" or ")}, or use API keys`;
}

export function date(ms: number | null): string {
  return ms === null ? "-" : new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");
}

async function readPassword(): Promise<string> {
  // Decoded loosely, each bad byte would be U+FFFD: a password no browser could type.
  const text = strictUtf8(await new Response(Bun.stdin.stream()).bytes());
  if (text === null) throw new UsageError("the password on stdin is not UTF-8 text");
  const password = text.replace(/\r?\n$/, "");
  // Two lines piped in (a file, a heredoc) are a mistake, and no browser's field could type them.
  if (/[\r\n]/.test(password)) throw new UsageError("the password on stdin has a line break inside it (one at its end is dropped)");
  return password;
}

const USER_USAGE =
  "usage: modelgate user add EMAIL [--admin] [--password-stdin] | user password EMAIL (the new one on stdin) | user disable EMAIL | user enable EMAIL | user verify EMAIL";

export const userCommand = command(
  async (ctx) => {
    const [, sub, email] = ctx.args.positionals;
    if (!email) throw new UsageError(USER_USAGE);
    if (sub === "disable") {
      const result = await withDb(ctx, async (db) => disableUser(db, (await requireUser(db, email, ctx)).id));
      ctx.print(
        result === "disabled"
          ? `disabled ${email}: their sessions ended and their API keys are refused from the next request (modelgate user enable ${email} undoes it)`
          : `${email} was already disabled`,
      );
      return 0;
    }
    if (sub === "enable") {
      const result = await withDb(ctx, async (db) => enableUser(db, (await requireUser(db, email, ctx)).id));
      ctx.print(result === "enabled" ? `enabled ${email}: their API keys work again; they sign in again for a session` : `${email} was not disabled`);
      return 0;
    }
    if (sub === "verify") {
      // The operator vouches for the address (its owner proved it to them): OAuth may join the account, setup and --admin accept it.
      const result = await withDb(ctx, async (db) => proveEmail(db, (await requireUser(db, email, ctx)).id));
      ctx.print(
        result === "proven" ? `${email} is now a proven address: GitHub or Google sign-in with it joins this account` : `${email} was already a proven address`,
      );
      return 0;
    }
    if (sub === "password") {
      // The way back in for someone who forgot theirs (the only administrator too). The sessions end,
      // and the device tokens die with the old password's hash.
      const password = await readPassword();
      const problem = passwordProblem(password);
      if (problem !== null) throw new UsageError(problem);
      const opened = await ctx.openDb();
      try {
        const user = await requireUser(opened.db, email, ctx);
        await setPassword(opened.db, user.id, password);
        await deleteUserSessions(opened.db, user.id);
      } finally {
        await opened.close();
      }
      ctx.print(`set a new password for ${email}; their sessions ended, so they sign in again`);
      return 0;
    }
    if (sub !== "add") throw new UsageError(USER_USAGE);
    const password = ctx.args.flags.has("password-stdin") ? await readPassword() : undefined;
    const isAdmin = ctx.args.flags.has("admin");
    const opened = await ctx.openDb({ create: true });
    try {
      const created = await createUser(opened.db, { email, password, isAdmin });
      if ("error" in created) {
        const existing = isAdmin && created.param === "email" ? await findUserByEmail(opened.db, email) : null;
        if (!existing) throw new UsageError(created.error);
        // As the setup link: whoever signed up first with the address would hold an administrator's session.
        if (existing.emailUnverified) {
          throw new UsageError(
            `${existing.email} was made by a password sign-up, which does not prove the address; it is not made an administrator (choose another address for the administrator)`,
          );
        }
        const unchanged = password === undefined ? "" : " (its password is unchanged)";
        if (existing.isAdmin) ctx.print(`${existing.email} was already an administrator${unchanged}`);
        else {
          await setAdmin(opened.db, existing.id);
          ctx.print(`${existing.email} already existed; it is now an administrator${unchanged}`);
        }
        return 0;
      }
      ctx.print(
        `created user ${created.id} ${created.email}${created.isAdmin ? " (administrator)" : ""}${password === undefined ? `; no password: ${withoutPassword(ctx)}` : ""}`,
      );
      return 0;
    } finally {
      await opened.close();
    }
  },
  {
    add: { flags: ["admin", "password-stdin"], words: 3 },
    password: { flags: [], words: 3 },
    disable: { flags: [], words: 3 },
    enable: { flags: [], words: 3 },
    verify: { flags: [], words: 3 },
  },
);

export const creditsCommand = command(
  async (ctx) => {
    const sub = ctx.args.positionals[1];
    const email = stringFlag(ctx.args, "user");
    if (sub === "grant" && email) {
      const amount = requireFlag(ctx.args, "amount");
      const micro = parseCredits(amount);
      if (micro === null) throw new UsageError(`--amount: "${amount}" is not ${AMOUNT_RULE}`);
      const note = stringFlag(ctx.args, "note") ?? "granted from the command line";
      const balance = await withDb(ctx, async (db) => grantCredits(db, { userId: (await requireUser(db, email, ctx)).id, micro, note }));
      if (balance === null) throw new UsageError(`--amount: ${PAST_MAX_BALANCE}`);
      ctx.print(`granted ${formatCredits(micro)} credits to ${email}; balance ${formatCredits(balance)}`);
      return 0;
    }
    if (sub === "balance" && email) {
      const balance = await withDb(ctx, async (db) => getBalance(db, (await requireUser(db, email, ctx)).id));
      ctx.print(`${email}: ${formatCredits(balance)} credits`);
      return 0;
    }
    throw new UsageError("usage: modelgate credits grant --user EMAIL --amount 12.50 | credits balance --user EMAIL");
  },
  {
    grant: { flags: ["user", "amount", "note"], words: 2 },
    balance: { flags: ["user"], words: 2 },
  },
);
