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
import { setupTokens, users } from "../db/schema";
import { randomToken, sha256Hex } from "./tokens";
import { forgetVerifiedKeys } from "./apikey";
import { deleteUserSessions } from "./session";
import { findUserByEmail, hasAdmin, type User } from "./users";
import { normalizeEmail } from "./email";
import { hashPassword, passwordProblem } from "./password";

const LIFETIME_MS = 86_400_000;

export function issueSetupLink(db: Db, input: { now: number; publicUrl: string }): string | null {
  db.delete(setupTokens).run();
  if (hasAdmin(db)) return null;
  const token = randomToken(20);
  db.insert(setupTokens)
    .values({ tokenHash: sha256Hex(token), expiresAt: input.now + LIFETIME_MS })
    .run();
  return `${input.publicUrl.replace(/\/+$/, "")}/setup?token=${token}`;
}

export function setupTokenValid(db: Db, token: unknown, now: number): boolean {
  if (typeof token !== "string" || !/^[a-z2-7]{32}$/.test(token)) return false;
  const row = db
    .select({ expiresAt: setupTokens.expiresAt })
    .from(setupTokens)
    .where(and(eq(setupTokens.tokenHash, sha256Hex(token)), gt(setupTokens.expiresAt, now)))
    .get();
  return row !== undefined && !hasAdmin(db);
}

export async function completeSetup(
  db: Db,
  input: { token: unknown; email: unknown; password: unknown; now: number },
): Promise<User | { error: string; param?: string; reason?: "setup_email_taken" }> {
  if (!setupTokenValid(db, input.token, input.now)) return { error: "This setup link is invalid, expired or already used" };
  const email = normalizeEmail(input.email);
  if (email === null) return { error: "Enter a valid email address", param: "email" };
  const problem = passwordProblem(input.password);
  if (problem) return { error: problem, param: "password" };
  // Hash first: everything after the await runs in one synchronous transaction, so two posts of
  // one link cannot both act, and a refused post changes nothing.
  const passwordHash = await hashPassword(input.password as string);
  const result = db.transaction((tx): User | "taken" | null => {
    const t = tx as unknown as Db;
    const existing = findUserByEmail(t, email);
    // Anyone could have signed up with the address the operator is about to type (open sign-up):
    // such an account is refused (the link stays usable), or its maker would hold an
    // administrator's session and keys.
    if (existing?.emailUnverified) return "taken";
    const claimed = tx
      .delete(setupTokens)
      .where(and(eq(setupTokens.tokenHash, sha256Hex(input.token as string)), gt(setupTokens.expiresAt, input.now)))
      .returning()
      .all();
    if (claimed.length === 0 || hasAdmin(t)) return null;
    tx.delete(setupTokens).run();
    if (existing) {
      // An account an administrator's tool made (the CLI): it becomes the admin, with this password only.
      tx.update(users).set({ passwordHash, isAdmin: true, disabledAt: null }).where(eq(users.id, existing.id)).run();
      deleteUserSessions(t, existing.id);
      forgetVerifiedKeys(db); // its keys were kept as refused if it was disabled
      return { ...existing, passwordHash, isAdmin: true, disabledAt: null };
    }
    return tx.insert(users).values({ email, passwordHash, isAdmin: true, emailUnverified: false }).returning().get();
  });
  if (result === "taken")
    return {
      error: `${email} already has an account, made by a sign-up that did not prove the address; choose another address for the administrator`,
      param: "email",
      reason: "setup_email_taken",
    };
  return result ?? { error: "This setup link is invalid, expired or already used" };
}
