/**
 * First start without an administrator: `modelgate serve` logs a one-time link
 * `${public_url}/setup?token=...`; whoever opens it chooses the admin's email and password.
 * Only the token's SHA-256 is stored; each start without an admin replaces the previous token,
 * a token lives 24 hours, and completing setup (or any admin existing) invalidates every token.
 *
 *   issueSetupLink(db, { now, publicUrl }) -> link | null (null: an admin exists)
 *   setupTokenValid(db, token, now) -> boolean
 *   completeSetup(db, { token, email, password, now }) -> User | { error, param?, reason? }
 * The form itself is the dashboard's page (GET /setup, src/dashboard/pages/setup.ts); the post
 * goes to the identities routes (POST /setup, routes.ts).
 */
import { and, eq, gt } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf, transact } from "../db/engine";
import { randomToken, sha256Hex } from "./tokens";
import { forgetVerifiedKeys } from "./apikey";
import { deleteUserSessions } from "./session";
import { findUserByEmail, hasAdmin, type User } from "./users";
import { normalizeEmail } from "./email";
import { hashPassword, passwordProblem } from "./password";

const LIFETIME_MS = 86_400_000;

export async function issueSetupLink(db: Db, input: { now: number; publicUrl: string }): Promise<string | null> {
  const { setupTokens } = tablesOf(db);
  await db.delete(setupTokens);
  if (await hasAdmin(db)) return null;
  const token = randomToken(20);
  await db.insert(setupTokens).values({ tokenHash: sha256Hex(token), expiresAt: input.now + LIFETIME_MS });
  return `${input.publicUrl.replace(/\/+$/, "")}/setup?token=${token}`;
}

export async function setupTokenValid(db: Db, token: unknown, now: number): Promise<boolean> {
  if (typeof token !== "string" || !/^[a-z2-7]{32}$/.test(token)) return false;
  const { setupTokens } = tablesOf(db);
  const [row] = await db
    .select({ expiresAt: setupTokens.expiresAt })
    .from(setupTokens)
    .where(and(eq(setupTokens.tokenHash, sha256Hex(token)), gt(setupTokens.expiresAt, now)))
    .limit(1);
  return row !== undefined && !(await hasAdmin(db));
}

export async function completeSetup(
  db: Db,
  input: { token: unknown; email: unknown; password: unknown; now: number },
): Promise<User | { error: string; param?: string; reason?: "setup_email_taken" }> {
  if (!(await setupTokenValid(db, input.token, input.now))) return { error: "This setup link is invalid, expired or already used" };
  const email = normalizeEmail(input.email);
  if (email === null) return { error: "Enter a valid email address", param: "email" };
  const problem = passwordProblem(input.password);
  if (problem) return { error: problem, param: "password" };
  // Hashed before the transaction, which then holds only what decides: two posts of one link
  // cannot both act (the token's delete is the claim; on Postgres the second waits on the row and
  // finds it gone), and a refused post changes nothing.
  const passwordHash = await hashPassword(input.password as string);
  const result = await transact(db, async (tx): Promise<User | "taken" | null> => {
    const { setupTokens, users } = tablesOf(tx);
    const existing = await findUserByEmail(tx, email);
    // Anyone could have signed up with the address the operator is about to type (open sign-up):
    // such an account is refused (the link stays usable), or its maker would hold an
    // administrator's session and keys.
    if (existing?.emailUnverified) return "taken";
    const claimed = await tx
      .delete(setupTokens)
      .where(and(eq(setupTokens.tokenHash, sha256Hex(input.token as string)), gt(setupTokens.expiresAt, input.now)))
      .returning({ tokenHash: setupTokens.tokenHash });
    if (claimed.length === 0 || (await hasAdmin(tx))) return null;
    await tx.delete(setupTokens);
    if (existing) {
      // An account an administrator's tool made (the CLI): it becomes the admin, with this password only.
      await tx.update(users).set({ passwordHash, isAdmin: true, disabledAt: null }).where(eq(users.id, existing.id));
      await deleteUserSessions(tx, existing.id);
      return { ...existing, passwordHash, isAdmin: true, disabledAt: null };
    }
    // A sign-up of the address committed since the read (another replica) makes this insert a
    // no-op: taken, and the claim rolls back so that the link stays usable.
    const [created] = await tx
      .insert(users)
      .values({ email, passwordHash, isAdmin: true, emailUnverified: false })
      .onConflictDoNothing({ target: users.email })
      .returning();
    if (created === undefined) throw TAKEN;
    return created;
  }).catch((err: unknown) => {
    if (err === TAKEN) return "taken" as const;
    throw err;
  });
  // A CLI-made account that was disabled had its keys cached as refused.
  if (result !== null && result !== "taken") forgetVerifiedKeys(db);
  if (result === "taken")
    return {
      error: `${email} already has an account, made by a sign-up that did not prove the address; choose another address for the administrator`,
      param: "email",
      reason: "setup_email_taken",
    };
  return result ?? { error: "This setup link is invalid, expired or already used" };
}

/** Thrown inside the transaction so that the claim of the token rolls back. */
const TAKEN = new Error("setup_email_taken");
