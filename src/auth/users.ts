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
 *   normalizeStoredEmails(db) -> the accounts whose stored email cannot be put in its lookup form
 *   proveEmail(db, userId) -> an operator vouches for an account's address (it was unproven)
 *
 * A disabled user keeps their row, keys and ledger. Disabling ends their sessions in the same
 * transaction and empties the verified-key cache, so their API keys are refused from the next
 * request on (from another process: within the cache's poll, see key-verifier.ts). Enabling lets
 * the keys work again; sessions stay ended (the user signs in again).
 */
import { and, eq, sql } from "drizzle-orm";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { users } from "../db/schema";
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
  const inserted = db
    .insert(users)
    .values({ email, passwordHash, isAdmin: input.isAdmin ?? false, emailUnverified: input.emailUnverified ?? false })
    .onConflictDoNothing()
    .returning()
    .get();
  return inserted ?? { error: `a user with the email ${email} already exists`, param: "email" };
}

function prepareByEmail(db: Db) {
  return db
    .select()
    .from(users)
    .where(eq(users.email, sql.placeholder("email")))
    .prepare();
}

/**
 * Prepared once per database: a triage job looks its `as_user` up on every model call, and
 * Drizzle building the query anew costs some 100 µs of CPU, the prepared one about 3.
 */
const byEmail = new WeakMap<Db, ReturnType<typeof prepareByEmail>>();

export function findUserByEmail(db: Db, email: string): User | null {
  const normalized = normalizeEmail(email);
  if (normalized === null) return null;
  let query = byEmail.get(db);
  if (query === undefined) byEmail.set(db, (query = prepareByEmail(db)));
  return query.get({ email: normalized }) ?? null;
}

/**
 * The user whose stored email is exactly `email`, not its lookup form: the one way to reach an
 * account whose stored email normalizeStoredEmails could not rewrite (its form is another
 * account's), as the start-up warning names it. For the CLI only; sign-in never looks this way.
 */
export function findUserByStoredEmail(db: Db, email: string): User | null {
  return db.select().from(users).where(eq(users.email, email)).get() ?? null;
}

export function findUserById(db: Db, id: number): User | null {
  return db.select().from(users).where(eq(users.id, id)).get() ?? null;
}

export type PasswordCheck = { ok: true; user: User & { passwordHash: string } } | { ok: false; reason: "credentials" | "disabled" };

/** Whether the email and password match an enabled account; "disabled" only after they matched. */
export async function checkPassword(db: Db, email: string, password: string): Promise<PasswordCheck> {
  const user = findUserByEmail(db, email);
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

export function hasAdmin(db: Db): boolean {
  return db.select({ id: users.id }).from(users).where(eq(users.isAdmin, true)).limit(1).get() !== undefined;
}

export function setAdmin(db: Db, userId: number): void {
  db.update(users).set({ isAdmin: true }).where(eq(users.id, userId)).run();
}

/**
 * Read-then-write transactions take the write lock up front: a deferred one that read while the
 * server (another connection) committed could not upgrade and would fail at once with
 * SQLITE_BUSY; an immediate one waits for the lock within the busy timeout.
 */
const IMMEDIATE = { behavior: "immediate" } as const;

/** Disables the account and ends its sessions (see the header); a second call changes nothing. */
export function disableUser(db: Db, userId: number, options: { now?: number } = {}): "disabled" | "already_disabled" | "not_found" {
  return db.transaction((tx) => {
    const t = tx as unknown as Db;
    const row = t.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, userId)).get();
    if (row === undefined) return "not_found";
    if (row.disabledAt !== null) return "already_disabled";
    t.update(users)
      .set({ disabledAt: options.now ?? Date.now() })
      .where(eq(users.id, userId))
      .run();
    forgetVerifiedKeys(db);
    deleteUserSessions(t, userId);
    return "disabled";
  }, IMMEDIATE);
}

/** Enables a disabled account again: its keys work from the next request. */
export function enableUser(db: Db, userId: number): "enabled" | "already_enabled" | "not_found" {
  return db.transaction((tx) => {
    const t = tx as unknown as Db;
    const row = t.select({ disabledAt: users.disabledAt }).from(users).where(eq(users.id, userId)).get();
    if (row === undefined) return "not_found";
    if (row.disabledAt === null) return "already_enabled";
    t.update(users).set({ disabledAt: null }).where(eq(users.id, userId)).run();
    forgetVerifiedKeys(db);
    return "enabled";
  }, IMMEDIATE);
}

export async function setPassword(db: Db, userId: number, password: string): Promise<void> {
  const passwordHash = await hashPassword(password);
  db.update(users).set({ passwordHash }).where(eq(users.id, userId)).run();
}

/** Why `auth.signup` refuses a new account for this email, or null when it may be created. */
export function signupRefusal(auth: Config["auth"], email: string): string | null {
  if (auth.signup === "open") return null;
  if (auth.signup === "closed") return "sign-up is closed on this gateway; ask an administrator for an account";
  const domain = email.slice(email.lastIndexOf("@") + 1);
  const allowed = allowedDomains(auth);
  return allowed.includes(domain) ? null : `sign-up is limited to addresses at ${allowed.join(", ") || "(no domains configured)"}`;
}

/**
 * Rewrites emails stored before they were kept in NFKC form (older releases only trimmed and
 * lower-cased them, so `ｆｕｌｌ@example.com` could no longer be found, or found another account).
 * A row is left as it is when its form belongs to another account or is no longer a valid
 * address; those are returned, for the caller to report. A scan of `users` that writes nothing
 * once every row is in form, so it runs at every open.
 */
export function normalizeStoredEmails(db: Db): Array<{ id: number; email: string }> {
  const stuck: Array<{ id: number; email: string }> = [];
  const rows = db.select({ id: users.id, email: users.email }).from(users).orderBy(users.id).all();
  for (const row of rows) {
    const email = normalizeEmail(row.email);
    if (email === row.email) continue;
    if (email === null || findUserByEmail(db, email) !== null) stuck.push(row);
    else db.update(users).set({ email }).where(eq(users.id, row.id)).run();
  }
  return stuck;
}

/** The operator vouches for the account's address (its owner proved it to them): OAuth may then join it, setup and `--admin` accept it. */
export function proveEmail(db: Db, userId: number): "proven" | "already_proven" {
  const changed = db
    .update(users)
    .set({ emailUnverified: false })
    .where(and(eq(users.id, userId), eq(users.emailUnverified, true)))
    .returning({ id: users.id })
    .all();
  return changed.length === 1 ? "proven" : "already_proven";
}
