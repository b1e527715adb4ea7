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
 *
 * The validator is on the request path of every page and session call: on SQLite it answers
 * synchronously from prepared statements, as it always did; on Postgres it returns a promise, its
 * statements prepared by Bun.sql. Everything else returns a promise on both engines.
 */
import type { SQL } from "bun";
import { eq } from "drizzle-orm";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf, tablesOf } from "../db/engine";
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

/** A session row joined with its user. */
interface SessionRow {
  tokenHash: string;
  userId: number;
  expiresAt: number;
  email: string;
  isAdmin: boolean;
  disabledAt: number | null;
  balance: number;
}

export type SessionCheck = { ok: true; session: SessionUser } | { ok: false; message: string };

export async function createSession(db: Db, input: { userId: number; now: number; durationMs: number }): Promise<{ token: string; expiresAt: number }> {
  const token = randomToken(20);
  const expiresAt = input.now + input.durationMs;
  await db.insert(tablesOf(db).sessions).values({ tokenHash: sha256Hex(token), userId: input.userId, expiresAt, createdAt: input.now });
  return { token, expiresAt };
}

/**
 * A session for a sign-in by password, made only while the account still has the password hash
 * that was checked and is enabled, in one statement: a password reset or a disable committed
 * while the password was being checked (argon2 takes tens of ms) wins, and null is returned,
 * rather than a session made after the reset ended the account's sessions.
 */
export async function createPasswordSession(
  db: Db,
  input: { userId: number; passwordHash: string; now: number; durationMs: number },
): Promise<{ token: string; expiresAt: number } | null> {
  const token = randomToken(20);
  const hash = sha256Hex(token);
  const expiresAt = input.now + input.durationMs;
  const pg = postgresOf(db);
  let changes: number;
  if (pg) {
    const inserted = await pg`INSERT INTO sessions (token_hash, user_id, expires_at, created_at) SELECT ${hash}, ${input.userId}, ${expiresAt}, ${input.now}
        WHERE EXISTS (SELECT 1 FROM users WHERE id = ${input.userId} AND password_hash = ${input.passwordHash} AND disabled_at IS NULL)`;
    changes = inserted.count;
  } else {
    changes = db.$client
      .query<unknown, [string, number, number, number, string]>(
        `INSERT INTO sessions (token_hash, user_id, expires_at, created_at) SELECT ?1, ?2, ?3, ?4
          WHERE EXISTS (SELECT 1 FROM users WHERE id = ?2 AND password_hash = ?5 AND disabled_at IS NULL)`,
      )
      .run(hash, input.userId, expiresAt, input.now, input.passwordHash).changes;
  }
  return changes === 1 ? { token, expiresAt } : null;
}

/** The three statements the validator runs, on one engine. */
interface SessionStatements {
  find(hash: string): SessionRow | null | Promise<SessionRow | null>;
  /** Writes that can wait: a failure is caught by the validator, and a later request tries again. */
  slide(expiresAt: number, hash: string): void | Promise<void>;
  remove(hash: string): void | Promise<void>;
}

function sqliteStatements(db: Db): SessionStatements {
  const byHash = db.$client.query<Omit<SessionRow, "isAdmin"> & { isAdmin: number }, [string]>(
    `SELECT s.token_hash AS tokenHash, s.user_id AS userId, s.expires_at AS expiresAt, u.email AS email,
            u.is_admin AS isAdmin, u.disabled_at AS disabledAt,
            COALESCE((SELECT micro FROM balances WHERE user_id = s.user_id), 0) AS balance
       FROM sessions s JOIN users u ON u.id = s.user_id
      WHERE s.token_hash = ?`,
  );
  // Writes on the request path that can wait: with the database locked elsewhere they are skipped
  // (tried again on a later request), never a 5 s stall or a 500.
  const update = db.$client.query<unknown, [number, string]>("UPDATE sessions SET expires_at = ? WHERE token_hash = ?");
  const deleteRow = db.$client.query<unknown, [string]>("DELETE FROM sessions WHERE token_hash = ?");
  return {
    find(hash) {
      const row = byHash.get(hash);
      return row === null ? null : { ...row, isAdmin: row.isAdmin === 1 };
    },
    slide: brieflyLocked(db.$client, (expiresAt: number, hash: string) => void update.run(expiresAt, hash)),
    remove: brieflyLocked(db.$client, (hash: string) => void deleteRow.run(hash)),
  };
}

function postgresStatements(sql: SQL): SessionStatements {
  return {
    async find(hash) {
      const [row] = await sql`
        SELECT s.token_hash, s.user_id, s.expires_at, u.email, u.is_admin, u.disabled_at,
               COALESCE((SELECT micro FROM balances WHERE user_id = s.user_id), 0) AS balance
          FROM sessions s JOIN users u ON u.id = s.user_id
         WHERE s.token_hash = ${hash}`;
      if (row === undefined) return null;
      // Bun.sql reads bigint columns as strings.
      return {
        tokenHash: row.token_hash,
        userId: Number(row.user_id),
        expiresAt: Number(row.expires_at),
        email: row.email,
        isAdmin: row.is_admin === true,
        disabledAt: row.disabled_at === null ? null : Number(row.disabled_at),
        balance: Number(row.balance),
      };
    },
    async slide(expiresAt, hash) {
      await sql`UPDATE sessions SET expires_at = ${expiresAt} WHERE token_hash = ${hash}`;
    },
    async remove(hash) {
      await sql`DELETE FROM sessions WHERE token_hash = ${hash}`;
    },
  };
}

const INVALID = { ok: false as const, message: "The session cookie is not valid; sign in again" };

/**
 * What a found row means now, and the one write it calls for: an ended session is deleted, a live
 * one is slid when its expiry is an hour or more behind now + durationMs.
 */
function judge(
  row: SessionRow | null,
  input: { token: string; hash: string; now: number; durationMs: number },
): { check: SessionCheck; write: "remove" | "slide" | null } {
  const { now, durationMs } = input;
  if (row === null || !equalSecrets(row.tokenHash, input.hash)) return { check: INVALID, write: null };
  // A session slid under a longer auth.session_days than today's ends too: when it was last used
  // is not kept, and the shorter lifetime is what the operator asked for. (Under one setting an
  // expiry is at most now + durationMs; the slide's hour of slack covers a clock set back.)
  if (row.expiresAt <= now || row.expiresAt - now > durationMs + SLIDE_EVERY_MS)
    return { check: { ok: false, message: "The session has expired; sign in again" }, write: "remove" };
  if (row.disabledAt !== null) return { check: { ok: false, message: "This account is disabled" }, write: null };
  const session = { userId: row.userId, email: row.email, isAdmin: row.isAdmin, balance: row.balance, expiresAt: row.expiresAt, token: input.token };
  return { check: { ok: true, session }, write: now + durationMs - row.expiresAt >= SLIDE_EVERY_MS ? "slide" : null };
}

/** The session's user for a token, or why not: synchronous on SQLite, a promise on Postgres (see header). */
export function createSessionValidator(db: Db, options: { now: () => number; durationMs: number }): (token: string) => SessionCheck | Promise<SessionCheck> {
  const pg = postgresOf(db);
  const statements = pg ? postgresStatements(pg) : sqliteStatements(db);
  return (token) => {
    if (!TOKEN.test(token)) return INVALID;
    const hash = sha256Hex(token);
    const now = options.now();
    const slidTo = now + options.durationMs;
    const decide = (row: SessionRow | null): SessionCheck | Promise<SessionCheck> => {
      const { check, write } = judge(row, { token, hash, now, durationMs: options.durationMs });
      if (write === null) return check;
      const written = (): SessionCheck => (check.ok && write === "slide" ? { ok: true, session: { ...check.session, expiresAt: slidTo } } : check);
      let pending: void | Promise<void>;
      try {
        pending = write === "slide" ? statements.slide(slidTo, hash) : statements.remove(hash);
      } catch {
        return check; // not written this time: a later request (or the sign-out) tries again
      }
      return pending instanceof Promise ? pending.then(written, () => check) : written();
    };
    const row = statements.find(hash);
    return row instanceof Promise ? row.then(decide) : decide(row);
  };
}

export async function deleteSession(db: Db, token: string): Promise<void> {
  const { sessions } = tablesOf(db);
  await db.delete(sessions).where(eq(sessions.tokenHash, sha256Hex(token)));
}

export async function deleteUserSessions(db: Db, userId: number): Promise<void> {
  const { sessions } = tablesOf(db);
  await db.delete(sessions).where(eq(sessions.userId, userId));
}

/**
 * Deletes the rows of sessions that can no longer sign in (expired, or slid under a longer
 * session_days than today's: the validator's own test), so the rows of browsers that never come
 * back do not pile up. The server runs it hourly (see identities.ts); a locked database skips a round.
 */
export async function pruneEndedSessions(db: Db, options: { now: number; durationMs: number }): Promise<number> {
  const latest = options.now + options.durationMs + SLIDE_EVERY_MS;
  const pg = postgresOf(db);
  if (pg) return (await pg`DELETE FROM sessions WHERE expires_at <= ${options.now} OR expires_at > ${latest}`).count;
  const statement = db.$client.query<unknown, [number, number]>("DELETE FROM sessions WHERE expires_at <= ?1 OR expires_at > ?2");
  return statement.run(options.now, latest).changes;
}
