/**
 * Users, as plain functions over a database handle (server and CLI). Emails are stored in the one
 * form ./email.ts gives them, so lookups are exact; passwords are hashed as ./password.ts says. A
 * user without a password signs in through OAuth.
 *
 *   createUser(db, { email, password?, isAdmin?, emailUnverified? }) -> User | UserError
 *   findUserByEmail(db, email) / findUserById(db, id) / findUserByStoredEmail(db, email) -> User | null
 *   checkPassword(db, email, password) -> { ok, user } | { ok: false, reason }   (constant work
 *     whether or not the user exists; "disabled" only once the password matched)
 *   verifyPassword(db, email, password) -> User | null   (an enabled account whose password matches)
 *   hasAdmin(db), setAdmin(db, userId), setPassword(db, userId, password)
 *   disableUser(db, userId, { now? }) / enableUser(db, userId) -> what happened
 *   signupRefusal(config.auth, email) -> null | reason
 *   proveEmail(db, userId) -> an operator vouches for an account's address (it was unproven)
 *
 * A disabled user keeps their row, keys and ledger. Disabling ends their sessions in the same
 * transaction and empties the verified-key cache, so their API keys are refused from the next
 * request on (from another process: within the cache's poll, see key-verifier.ts). Enabling lets
 * the keys work again; sessions stay ended (the user signs in again).
 *
 * Every function returns a promise on both engines (emails stored before that form are put in
 * it by ./stored-emails.ts). The unique email is the engines' constraint: a second account with an
 * address is refused by the insert itself, so two replicas signing one address up at once make
 * one account.
 */
import { and, eq, isNotNull, isNull, sql } from "drizzle-orm";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { postgresOf, tablesOf, transact } from "../db/engine";
import type { users } from "../db/schema";
import { forgetVerifiedKeys } from "./apikey";
import { deleteUserSessions } from "./session";
import { allowedDomains, normalizeEmail } from "./email";
import { hashPassword, passwordMatches, passwordProblem, verifyAgainstNothing } from "./password";

export type User = typeof users.$inferSelect;
export interface UserError {
  error: string;
  param: "email" | "password";
}

export async function createUser(db: Db, input: { email: string; password?: string; isAdmin?: boolean; emailUnverified?: boolean }): Promise<User | UserError> {
  const email = normalizeEmail(input.email);
  if (email === null) return { error: `"${String(input.email).slice(0, 80)}" is not an email address`, param: "email" };
  if (input.password !== undefined) {
    const problem = passwordProblem(input.password);
    if (problem) return { error: problem, param: "password" };
  }
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
  const { users } = tablesOf(db);
  const [inserted] = await db
    .insert(users)
    .values({ email, passwordHash, isAdmin: input.isAdmin ?? false, emailUnverified: input.emailUnverified ?? false })
    .onConflictDoNothing({ target: users.email })
    .returning();
  return inserted ?? { error: `a user with the email ${email} already exists`, param: "email" };
}

function prepareByEmail(db: Db) {
  const { users } = tablesOf(db);
  return db
    .select()
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare();
}

/**
 * Prepared once per SQLite database: a triage job looks its `as_user` up on every model call, and
 * Drizzle building the query anew costs some 100 µs of CPU, the prepared one about 3. On Postgres
 * the query is built each time (a round trip costs far more than building it).
 */
const byEmail = new WeakMap<Db, ReturnType<typeof prepareByEmail>>();

export async function findUserByEmail(db: Db, email: string): Promise<User | null> {
  const normalized = normalizeEmail(email);
  if (normalized === null) return null;
  if (postgresOf(db)) return findUserByStoredEmail(db, normalized);
  let query = byEmail.get(db);
  if (query === undefined) byEmail.set(db, (query = prepareByEmail(db)));
  return query.get({ email: normalized }) ?? null;
}

/**
 * The user whose stored email is exactly `email`, not its lookup form: the one way to reach an
 * account whose stored email normalizeStoredEmails could not rewrite (its form is another
 * account's), as the start-up warning names it. For the CLI only; sign-in never looks this way.
 */
export async function findUserByStoredEmail(db: Db, email: string): Promise<User | null> {
  const { users } = tablesOf(db);
  const [user] = await db.select().from(users).where(eq(users.email, email)).limit(1);
  return user ?? null;
}

export async function findUserById(db: Db, id: number): Promise<User | null> {
  const { users } = tablesOf(db);
  const [user] = await db.select().from(users).where(eq(users.id, id)).limit(1);
  return user ?? null;
}

export type PasswordCheck = { ok: true; user: User & { passwordHash: string } } | { ok: false; reason: "credentials" | "disabled" };

/** Whether the email and password match an enabled account; "disabled" only after they matched. */
export async function checkPassword(db: Db, email: string, password: string): Promise<PasswordCheck> {
  const user = await findUserByEmail(db, email);
  if (user === null || user.passwordHash === null) {
    await verifyAgainstNothing(password);
    return { ok: false, reason: "credentials" };
  }
  const ok = await passwordMatches(password, user.passwordHash);
  if (!ok) return { ok: false, reason: "credentials" };
  return user.disabledAt === null ? { ok: true, user: { ...user, passwordHash: user.passwordHash } } : { ok: false, reason: "disabled" };
}

/** The user when the email and password match an enabled account, else null. */
export async function verifyPassword(db: Db, email: string, password: string): Promise<User | null> {
  const checked = await checkPassword(db, email, password);
  return checked.ok ? checked.user : null;
}

export async function hasAdmin(db: Db): Promise<boolean> {
  const { users } = tablesOf(db);
  const [admin] = await db.select({ id: users.id }).from(users).where(eq(users.isAdmin, true)).limit(1);
  return admin !== undefined;
}

export async function setAdmin(db: Db, userId: number): Promise<void> {
  const { users } = tablesOf(db);
  await db.update(users).set({ isAdmin: true }).where(eq(users.id, userId));
}

/**
 * Sets `disabledAt` on the user in one transaction (taken with the write lock up front on SQLite,
 * see transact; on Postgres the row is locked by its update), then runs `alsoInTx`.
 */
async function setDisabledAt(
  db: Db,
  userId: number,
  change: { from: "enabled" | "disabled"; to: number | null; alsoInTx?: (tx: Db) => Promise<void> },
): Promise<"changed" | "unchanged" | "not_found"> {
  const result = await transact(db, async (tx) => {
    const { users } = tablesOf(tx);
    const [row] = await tx.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, userId)).limit(1);
    if (row === undefined) return "not_found";
    if ((row.disabledAt === null) !== (change.from === "enabled")) return "unchanged";
    const changed = await tx
      .update(users)
      .set({ disabledAt: change.to })
      .where(and(eq(users.id, userId), change.from === "enabled" ? isNull(users.disabledAt) : isNotNull(users.disabledAt)))
      .returning({ id: users.id });
    // Another replica changed it between the read and the update (Postgres reads without a lock).
    if (changed.length === 0) return "unchanged";
    await change.alsoInTx?.(tx);
    return "changed";
  });
  if (result === "changed") forgetVerifiedKeys(db);
  return result;
}

/** Disables the account and ends its sessions (see the header); a second call changes nothing. */
export async function disableUser(db: Db, userId: number, options: { now?: number } = {}): Promise<"disabled" | "already_disabled" | "not_found"> {
  const result = await setDisabledAt(db, userId, { from: "enabled", to: options.now ?? Date.now(), alsoInTx: (tx) => deleteUserSessions(tx, userId) });
  return result === "changed" ? "disabled" : result === "unchanged" ? "already_disabled" : "not_found";
}

/** Enables a disabled account again: its keys work from the next request. */
export async function enableUser(db: Db, userId: number): Promise<"enabled" | "already_enabled" | "not_found"> {
  const result = await setDisabledAt(db, userId, { from: "disabled", to: null });
  return result === "changed" ? "enabled" : result === "unchanged" ? "already_enabled" : "not_found";
}

export async function setPassword(db: Db, userId: number, password: string): Promise<void> {
  const passwordHash = await hashPassword(password);
  const { users } = tablesOf(db);
  await db.update(users).set({ passwordHash }).where(eq(users.id, userId));
}

/** Why `auth.signup` refuses a new account for this email, or null when it may be created. */
export function signupRefusal(auth: Config["auth"], email: string): string | null {
  if (auth.signup === "open") return null;
  if (auth.signup === "closed") return "sign-up is closed on this gateway; ask an administrator for an account";
  const domain = email.slice(email.lastIndexOf("@") + 1);
  const allowed = allowedDomains(auth);
  return allowed.includes(domain) ? null : `sign-up is limited to addresses at ${allowed.join(", ") || "(no domains configured)"}`;
}

/** The operator vouches for the account's address (its owner proved it to them): OAuth may then join it, setup and `--admin` accept it. */
export async function proveEmail(db: Db, userId: number): Promise<"proven" | "already_proven"> {
  const { users } = tablesOf(db);
  const changed = await db
    .update(users)
    .set({ emailUnverified: false })
    .where(and(eq(users.id, userId), eq(users.emailUnverified, true)))
    .returning({ id: users.id });
  return changed.length === 1 ? "proven" : "already_proven";
}
