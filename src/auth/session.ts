/**
 * Browser sessions. The token is 20 random bytes (32 base32 characters) held only in the
 * `mg_session` cookie (HttpOnly, SameSite=Lax, Path=/, Secure when public_url is https); the
 * database keeps its SHA-256. Expiry slides: a session used within `auth.session_days` stays alive,
 * and the new expiry is written at most once an hour. Sign-out deletes the row. The cookie itself
 * is read and written by ./cookies.ts; which origins may use it to change state, ./origin-policy.ts.
 *
 *   createSession(db, { userId, now, durationMs }) -> { token, expiresAt }
 *   createPasswordSession(db, { userId, passwordHash, now, durationMs }) -> { token, expiresAt } | null
 *   createSessionValidator(db, { now, durationMs }) -> (token) -> SessionUser | denial
 *   deleteSession(db, token), deleteUserSessions(db, userId)
 *   pruneEndedSessions(db, { now, durationMs }) -> rows deleted (the server runs it hourly)
 */
import { eq } from "drizzle-orm";
import { brieflyLocked, type Db } from "../db/client";
import { sessions } from "../db/schema";
import { randomToken, sha256Hex, equalSecrets } from "./tokens";

const TOKEN = /^[a-z2-7]{32}$/;
const SLIDE_EVERY_MS = 3_600_000;

export interface SessionUser {
  userId: number;
  email: string;
  isAdmin: boolean;
  /** Credits balance as stored (the gate subtracts what is reserved in memory). */
  balance: number;
  expiresAt: number;
  /** The raw token, for CSRF tokens derived from it (never logged). */
  token: string;
}

interface SessionRow {
  tokenHash: string;
  userId: number;
  expiresAt: number;
  email: string;
  isAdmin: number;
  disabledAt: number | null;
  balance: number;
}

export function createSession(db: Db, input: { userId: number; now: number; durationMs: number }): { token: string; expiresAt: number } {
  const token = randomToken(20);
  const expiresAt = input.now + input.durationMs;
  db.insert(sessions)
    .values({ tokenHash: sha256Hex(token), userId: input.userId, expiresAt, createdAt: input.now })
    .run();
  return { token, expiresAt };
}

/**
 * A session for a sign-in by password, made only while the account still has the password hash
 * that was checked and is enabled, in one statement: a password reset or a disable committed
 * while the password was being checked (argon2 takes tens of ms) wins, and null is returned,
 * rather than a session made after the reset ended the account's sessions.
 */
export function createPasswordSession(
  db: Db,
  input: { userId: number; passwordHash: string; now: number; durationMs: number },
): { token: string; expiresAt: number } | null {
  const token = randomToken(20);
  const expiresAt = input.now + input.durationMs;
  const { changes } = db.$client
    .query<unknown, [string, number, number, number, string]>(
      `INSERT INTO sessions (token_hash, user_id, expires_at, created_at) SELECT ?1, ?2, ?3, ?4
        WHERE EXISTS (SELECT 1 FROM users WHERE id = ?2 AND password_hash = ?5 AND disabled_at IS NULL)`,
    )
    .run(sha256Hex(token), input.userId, expiresAt, input.now, input.passwordHash);
  return changes === 1 ? { token, expiresAt } : null;
}

export function createSessionValidator(
  db: Db,
  options: { now: () => number; durationMs: number },
): (token: string) => { ok: true; session: SessionUser } | { ok: false; message: string } {
  const byHash = db.$client.query<SessionRow, [string]>(
    `SELECT s.token_hash AS tokenHash, s.user_id AS userId, s.expires_at AS expiresAt, u.email AS email,
            u.is_admin AS isAdmin, u.disabled_at AS disabledAt,
            COALESCE((SELECT micro FROM balances WHERE user_id = s.user_id), 0) AS balance
       FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.token_hash = ?`,
  );
  // Writes on the request path that can wait: with the database locked elsewhere they are skipped
  // (tried again on a later request), never a 5 s stall or a 500.
  const update = db.$client.query<unknown, [number, string]>("UPDATE sessions SET expires_at = ? WHERE token_hash = ?");
  const slide = brieflyLocked(db.$client, (expiresAt: number, hash: string) => update.run(expiresAt, hash));
  const deleteRow = db.$client.query<unknown, [string]>("DELETE FROM sessions WHERE token_hash = ?");
  const remove = brieflyLocked(db.$client, (hash: string) => deleteRow.run(hash));
  const invalid = { ok: false as const, message: "The session cookie is not valid; sign in again" };
  return (token) => {
    if (!TOKEN.test(token)) return invalid;
    const hash = sha256Hex(token);
    const row = byHash.get(hash);
    if (row === null || !equalSecrets(row.tokenHash, hash)) return invalid;
    const now = options.now();
    // A session slid under a longer auth.session_days than today's ends too: when it was last used
    // is not kept, and the shorter lifetime is what the operator asked for. (Under one setting an
    // expiry is at most now + durationMs; the slide's hour of slack covers a clock set back.)
    if (row.expiresAt <= now || row.expiresAt - now > options.durationMs + SLIDE_EVERY_MS) {
      try {
        remove(hash);
      } catch {
        // left for a later request (or the sign-out) to delete
      }
      return { ok: false, message: "The session has expired; sign in again" };
    }
    if (row.disabledAt !== null) return { ok: false, message: "This account is disabled" };
    let expiresAt = row.expiresAt;
    if (now + options.durationMs - expiresAt >= SLIDE_EVERY_MS) {
      try {
        slide(now + options.durationMs, hash);
        expiresAt = now + options.durationMs;
      } catch {
        // not slid this time: the next request tries again
      }
    }
    return {
      ok: true,
      session: { userId: row.userId, email: row.email, isAdmin: row.isAdmin === 1, balance: row.balance, expiresAt, token },
    };
  };
}

export function deleteSession(db: Db, token: string): void {
  db.delete(sessions)
    .where(eq(sessions.tokenHash, sha256Hex(token)))
    .run();
}

export function deleteUserSessions(db: Db, userId: number): void {
  db.delete(sessions).where(eq(sessions.userId, userId)).run();
}

/**
 * Deletes the rows of sessions that can no longer sign in (expired, or slid under a longer
 * session_days than today's: the validator's own test), so the rows of browsers that never come
 * back do not pile up. The server runs it hourly (see identities.ts); a locked database skips a round.
 */
export function pruneEndedSessions(db: Db, options: { now: number; durationMs: number }): number {
  const statement = db.$client.query<unknown, [number, number]>("DELETE FROM sessions WHERE expires_at <= ?1 OR expires_at > ?2");
  return statement.run(options.now, options.now + options.durationMs + SLIDE_EVERY_MS).changes;
}
