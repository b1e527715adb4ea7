/**
 * Users and their passwords, as plain functions over a database handle (server and CLI).
 * Emails are stored trimmed and lower-cased, so lookups are exact. Passwords are argon2id
 * (Bun.password); only the hash is stored. A user without a password signs in through OAuth.
 *
 *   createUser(db, { email, password?, isAdmin? }) -> User | UserError
 *   findUserByEmail(db, email) / findUserById(db, id) -> User | null
 *   verifyPassword(db, email, password) -> User | null   (constant work whether or not the user exists)
 *   hasAdmin(db), setAdmin(db, userId), setPassword(db, userId, password)
 *   signupAllowed(config.auth, email) -> null | reason
 */
import { eq } from "drizzle-orm";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { users } from "../db/schema";

export type User = typeof users.$inferSelect;
export interface UserError {
  error: string;
  param: "email" | "password";
}

const EMAIL = /^[^\s@]{1,64}@[^\s@]{1,253}\.[^\s@.]{1,63}$/;
export const PASSWORD_MIN = 8;
/** argon2 hashes whatever it is given; a bound keeps one request from costing seconds. */
export const PASSWORD_MAX = 256;
const ARGON2 = { algorithm: "argon2id", memoryCost: 19_456, timeCost: 2 } as const;
/** Verified against when the user does not exist, so the timing does not tell. */
let dummyHash: Promise<string> | null = null;

export function normalizeEmail(input: unknown): string | null {
  if (typeof input !== "string") return null;
  const email = input.trim().toLowerCase();
  return email.length <= 320 && EMAIL.test(email) ? email : null;
}

export function passwordProblem(password: unknown): string | null {
  if (typeof password !== "string") return "a password is required";
  if (password.length < PASSWORD_MIN) return `the password must be at least ${PASSWORD_MIN} characters`;
  if (password.length > PASSWORD_MAX) return `the password must be at most ${PASSWORD_MAX} characters`;
  return null;
}

export function hashPassword(password: string): Promise<string> {
  return Bun.password.hash(password, ARGON2);
}

export async function createUser(
  db: Db,
  input: { email: string; password?: string; isAdmin?: boolean },
): Promise<User | UserError> {
  const email = normalizeEmail(input.email);
  if (email === null) return { error: `"${String(input.email).slice(0, 80)}" is not an email address`, param: "email" };
  if (input.password !== undefined) {
    const problem = passwordProblem(input.password);
    if (problem) return { error: problem, param: "password" };
  }
  const passwordHash = input.password === undefined ? null : await hashPassword(input.password);
  const inserted = db
    .insert(users)
    .values({ email, passwordHash, isAdmin: input.isAdmin ?? false })
    .onConflictDoNothing()
    .returning()
    .get();
  return inserted ?? { error: `a user with the email ${email} already exists`, param: "email" };
}

export function findUserByEmail(db: Db, email: string): User | null {
  const normalized = normalizeEmail(email);
  if (normalized === null) return null;
  return db.select().from(users).where(eq(users.email, normalized)).get() ?? null;
}

export function findUserById(db: Db, id: number): User | null {
  return db.select().from(users).where(eq(users.id, id)).get() ?? null;
}

/** The user when the email and password match an enabled account, else null. */
export async function verifyPassword(db: Db, email: string, password: string): Promise<User | null> {
  const user = findUserByEmail(db, email);
  if (user === null || user.passwordHash === null) {
    dummyHash ??= hashPassword("modelgate timing equaliser");
    await Bun.password.verify(password, await dummyHash).catch(() => false);
    return null;
  }
  const ok = await Bun.password.verify(password, user.passwordHash).catch(() => false);
  return ok && user.disabledAt === null ? user : null;
}

export function hasAdmin(db: Db): boolean {
  return db.select({ id: users.id }).from(users).where(eq(users.isAdmin, true)).limit(1).get() !== undefined;
}

export function setAdmin(db: Db, userId: number): void {
  db.update(users).set({ isAdmin: true }).where(eq(users.id, userId)).run();
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
  const allowed = auth.allowed_domains.map((d) => d.trim().toLowerCase().replace(/^@/, ""));
  return allowed.includes(domain) ? null : `sign-up is limited to addresses at ${allowed.join(", ") || "(no domains configured)"}`;
}
