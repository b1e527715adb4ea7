/**
 * The dashboard's adapter over the identities, credits and webhooks parts (src/auth,
 * src/credits, src/webhooks): the few operations the pages need, shaped as the pages want them,
 * as plain calls over the database; nothing here writes a table itself.
 * The dashboard never holds a secret beyond handing a freshly created key to the page that
 * shows it once.
 */
import { desc, eq } from "drizzle-orm";
import type { AppDeps } from "../deps";
import { tablesOf } from "../db/engine";
import { createSessionValidator } from "../auth/session";
import { readSessionCookie } from "../auth/cookies";
import { listApiKeys, revokeApiKey } from "../auth/apikey";
import { createUser, disableUser, enableUser, findUserById, proveEmail } from "../auth/users";
import { getBalance, grantCredits, keySpendSince } from "../credits/ledger";
import { budgetPeriod, type PolicyChange } from "../auth/key-policy";
import { createKeyWithinCap, updateKeyPolicy } from "../auth/key-updates";
import { PAST_MAX_BALANCE } from "../credits/amount";
import { listJobs, outboxStats } from "../webhooks/admin";
import type { PageUser } from "./layout";
import type { KeyView } from "./pages/keys";
import type { OutboxView, UserView } from "./pages/admin";

type Result<T> = { ok: true; value: T } | { ok: false; message: string };

interface SignedIn {
  user: PageUser;
  /** The raw session cookie value (only used to derive the CSRF token; never rendered). */
  token: string;
}

/** A signed-in caller past the dashboard's guard, with the CSRF token its forms carry. */
export interface Guarded extends SignedIn {
  csrf: string;
}

/** A posted form's fields: only string values are kept (a JSON body may carry anything). */
export type Form = Record<string, string | undefined>;

export interface DashboardAccounts {
  sessionUser(request: Request): Promise<SignedIn | null>;
  listKeys(options: { userId?: number }): Promise<KeyView[]>;
  createKey(input: {
    userId: number;
    name: string;
    expiresAt: number | null;
    policy: PolicyChange;
  }): Promise<Result<{ id: string; key: string; name: string }>>;
  /** With `userId`, only that user's key; without, any (an admin). */
  updateKeyPolicy(keyId: string, change: PolicyChange, options: { userId?: number }): Promise<boolean>;
  revokeKey(keyId: string, options: { userId?: number }): Promise<boolean>;
  balance(userId: number): Promise<number>;
  listUsers(): Promise<UserView[]>;
  createUser(input: { email: string; password: string | null; isAdmin: boolean }): Promise<Result<{ id: number }>>;
  setUserDisabled(userId: number, options: { disabled: boolean }): Promise<boolean>;
  /** The admin vouches for the user's address (`modelgate user verify`). */
  proveEmail(userId: number): Promise<"proven" | "already_proven" | "not_found">;
  grantCredits(input: { userId: number; micro: number; note: string | null }): Promise<Result<{ balanceMicro: number }>>;
  outbox(): Promise<OutboxView | null>;
}

export function createAccounts(deps: AppDeps): DashboardAccounts {
  const { db, now } = deps;
  const validate = createSessionValidator(db, { now, durationMs: deps.config.auth.session_days * 86_400_000 });
  const { balances, users } = tablesOf(db);
  const userExists = async (id: number): Promise<boolean> => (await findUserById(db, id)) !== null;
  return {
    async sessionUser(request) {
      const token = readSessionCookie(request);
      if (token === null) return null;
      const result = await validate(token);
      if (!result.ok) return null;
      const s = result.session;
      return { user: { id: s.userId, email: s.email, isAdmin: s.isAdmin }, token };
    },
    async listKeys(options) {
      const at = now();
      const keys = await listApiKeys(db, options);
      const views: KeyView[] = [];
      for (const k of keys) {
        const since = budgetPeriod(k.budgetPeriod ?? "month", at).start;
        views.push({ ...k, ownerEmail: k.email, spentMicro: await keySpendSince(db, k.id, since) });
      }
      return views;
    },
    async createKey(input) {
      const cap = deps.config.limits.keys_per_user;
      const key = { userId: input.userId, name: input.name, expiresAt: input.expiresAt, policy: input.policy, now: now() };
      const created = await createKeyWithinCap(db, key, { keysPerUser: cap });
      if (created === null)
        return { ok: false, message: `You have ${cap} active keys, the most one account may hold ([limits] keys_per_user): revoke one first.` };
      return { ok: true, value: { id: created.id, key: created.key, name: created.name } };
    },
    async updateKeyPolicy(keyId, change, options) {
      return (await updateKeyPolicy(db, keyId, change, options)) === "updated";
    },
    async revokeKey(keyId, options) {
      return (await revokeApiKey(db, keyId, { ...options, now: now() })) === "revoked";
    },
    balance(userId) {
      return getBalance(db, userId);
    },
    async listUsers() {
      const rows = await db
        .select({
          id: users.id,
          email: users.email,
          isAdmin: users.isAdmin,
          emailUnverified: users.emailUnverified,
          disabledAt: users.disabledAt,
          createdAt: users.createdAt,
          balanceMicro: balances.micro,
        })
        .from(users)
        .leftJoin(balances, eq(balances.userId, users.id))
        .orderBy(desc(users.isAdmin), users.email);
      return rows.map((u) => ({ ...u, balanceMicro: u.balanceMicro ?? 0 }));
    },
    async createUser(input) {
      const created = await createUser(db, { email: input.email, password: input.password ?? undefined, isAdmin: input.isAdmin });
      return "error" in created ? { ok: false, message: capitalise(created.error) } : { ok: true, value: { id: created.id } };
    },
    async setUserDisabled(userId, options) {
      const result = options.disabled ? await disableUser(db, userId, { now: now() }) : await enableUser(db, userId);
      return result !== "not_found";
    },
    async proveEmail(userId) {
      return (await userExists(userId)) ? proveEmail(db, userId) : "not_found";
    },
    async grantCredits(input) {
      if (!(await userExists(input.userId))) return { ok: false, message: "No such user." };
      const balanceMicro = await grantCredits(db, { userId: input.userId, micro: input.micro, note: input.note ?? undefined, now: now() });
      if (balanceMicro === null) return { ok: false, message: `The amount is too large: ${PAST_MAX_BALANCE}.` };
      return { ok: true, value: { balanceMicro } };
    },
    async outbox() {
      if (!deps.config.webhooks.enabled) return null;
      const stats = await outboxStats(db, now());
      return {
        counts: { pending: stats.pending, leased: stats.leased, dead: stats.dead },
        recent: await listJobs(db, { limit: 20 }),
      };
    },
  };
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1) + (text.endsWith(".") ? "" : ".");
}
