/**
 * The outbox table's operations on SQLite, as plain synchronous functions over a bun:sqlite
 * handle: the group committer in ./outbox-sqlite.ts runs them inside its transactions. These
 * hot-path operations use cached prepared statements instead of the query builder. What they
 * keep true is in ./calls.ts; Postgres' are in ./store-pg.ts.
 */
import type { Database, Statement } from "bun:sqlite";
import { backoffDelay } from "../backoff";
import type { AppendInput, AppendResult, ClaimedRow, ClaimOptions, FailOptions, JobState } from "./calls";

interface Statements {
  insert: Statement;
  findDedupe: Statement<{ call_id: number; created_at: number }>;
  clearDedupe: Statement;
  candidates: Statement<{ call_id: number }>;
  lease: Statement<RawRow>;
  ack: Statement;
  base: Statement<{ attempt_base: number }>;
  fail: Statement<{ state: JobState }>;
  extend: Statement;
  release: Statement;
  killExpired: Statement;
  prune: Statement;
}

interface RawRow {
  call_id: number;
  job_id: number;
  service_id: number;
  path: string;
  name: string | null;
  body: Uint8Array;
  content_type: string | null;
  headers: string | null;
  attempts: number;
  lease_until: number;
  created_at: number;
}

const cache = new WeakMap<Database, Statements>();

function statements(sqlite: Database): Statements {
  let found = cache.get(sqlite);
  if (found) return found;
  found = {
    insert: sqlite.prepare(
      `INSERT INTO webhook_jobs (job_id, service_id, path, name, body, content_type, headers, dedupe_key, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    ),
    findDedupe: sqlite.prepare("SELECT call_id, created_at FROM webhook_jobs WHERE dedupe_key = ?"),
    clearDedupe: sqlite.prepare("UPDATE webhook_jobs SET dedupe_key = NULL WHERE call_id = ?"),
    candidates: sqlite.prepare(
      `SELECT call_id FROM webhook_jobs
       WHERE ((state = 'pending' AND next_attempt_at <= ?1) OR (state = 'leased' AND lease_until <= ?1))
         AND (?2 IS NULL OR job_id IN (SELECT value FROM json_each(?2)))
       ORDER BY call_id LIMIT ?3`,
    ),
    lease: sqlite.prepare(
      `UPDATE webhook_jobs SET state = 'leased', attempts = attempts + 1, lease_until = ?2
       WHERE call_id = ?1
       RETURNING call_id, job_id, service_id, path, name, body, content_type, headers, attempts, lease_until, created_at`,
    ),
    ack: sqlite.prepare(
      `UPDATE webhook_jobs SET state = 'done', done_at = ?3, lease_until = NULL, last_error = NULL
       WHERE call_id = ?1 AND state = 'leased' AND attempts = ?2`,
    ),
    base: sqlite.prepare("SELECT attempt_base FROM webhook_jobs WHERE call_id = ?"),
    fail: sqlite.prepare(
      `UPDATE webhook_jobs
       SET state = CASE WHEN attempts - attempt_base >= ?3 THEN 'dead' ELSE 'pending' END,
           next_attempt_at = ?4, lease_until = NULL, last_error = ?5
       WHERE call_id = ?1 AND state = 'leased' AND attempts = ?2
       RETURNING state`,
    ),
    extend: sqlite.prepare("UPDATE webhook_jobs SET lease_until = ?3 WHERE call_id = ?1 AND state = 'leased' AND attempts = ?2"),
    // The attempt is given back to the budget, not its number: the releasing holder cannot ack the next delivery.
    release: sqlite.prepare(
      `UPDATE webhook_jobs SET state = 'pending', attempt_base = attempt_base + 1, lease_until = NULL
       WHERE call_id = ?1 AND state = 'leased' AND attempts = ?2`,
    ),
    killExpired: sqlite.prepare(
      `UPDATE webhook_jobs SET state = 'dead', lease_until = NULL,
           last_error = 'lease expired on attempt ' || (attempts - attempt_base) || ' of ' || ?2
       WHERE state = 'leased' AND lease_until <= ?1 AND attempts - attempt_base >= ?2`,
    ),
    prune: sqlite.prepare("DELETE FROM webhook_jobs WHERE state = 'done' AND done_at < ?"),
  };
  cache.set(sqlite, found);
  return found;
}

/** The call stored under `dedupeKey`: `recent` when inside the window (a redelivery of it folds and takes no room). */
function dedupeEntry(sqlite: Database, dedupeKey: string, now: number, dedupeWindowMs: number): { callId: number; recent: boolean } | null {
  const previous = statements(sqlite).findDedupe.get(dedupeKey);
  return previous ? { callId: previous.call_id, recent: previous.created_at > now - dedupeWindowMs } : null;
}

/** Whether `dedupeKey` names a call stored within the window. */
export function isDuplicate(sqlite: Database, dedupeKey: string, now: number, dedupeWindowMs: number): boolean {
  return dedupeEntry(sqlite, dedupeKey, now, dedupeWindowMs)?.recent === true;
}

/** Appends one call (inside the caller's transaction). Redeliveries inside the window fold. */
export function appendCall(sqlite: Database, input: AppendInput, now: number, dedupeWindowMs: number): AppendResult {
  const s = statements(sqlite);
  if (input.dedupeKey !== null) {
    const previous = dedupeEntry(sqlite, input.dedupeKey, now, dedupeWindowMs);
    if (previous?.recent) return { callId: previous.callId, duplicate: true };
    if (previous) s.clearDedupe.run(previous.callId);
  }
  const result = s.insert.run(input.jobId, input.serviceId, input.path, input.name, input.body, input.contentType, input.headers ?? null, input.dedupeKey, now);
  return { callId: Number(result.lastInsertRowid), duplicate: false };
}

/**
 * Leases up to `limit` due calls, oldest first. Abandoned calls out of attempts become dead first,
 * so they never take a place in the limit: counted in it, they could fill it, and a claim come
 * back empty while due calls wait.
 */
export function claimCalls(sqlite: Database, options: ClaimOptions): ClaimedRow[] {
  const s = statements(sqlite);
  s.killExpired.run(options.now, options.maxAttempts);
  const filter = options.jobIds ? JSON.stringify(options.jobIds) : null;
  const claimed: ClaimedRow[] = [];
  for (const row of s.candidates.all(options.now, filter, options.limit)) {
    const leased = s.lease.get(row.call_id, options.now + options.leaseMs);
    if (leased) claimed.push(toClaimed(leased));
  }
  return claimed;
}

function toClaimed(row: RawRow): ClaimedRow {
  return {
    callId: row.call_id,
    jobId: row.job_id,
    serviceId: row.service_id,
    path: row.path,
    name: row.name,
    body: row.body,
    contentType: row.content_type,
    headers: row.headers,
    attempt: row.attempts,
    leaseUntil: row.lease_until,
    createdAt: row.created_at,
  };
}

/** Marks a leased call done; false when the lease was lost (taken over or already settled). */
export function ackCall(sqlite: Database, callId: number, attempt: number, now: number): boolean {
  return statements(sqlite).ack.run(callId, attempt, now).changes === 1;
}

/** Returns the call to pending after a backoff, or dead when out of attempts; null if lease lost. */
export function failCall(sqlite: Database, callId: number, attempt: number, options: FailOptions): JobState | null {
  const s = statements(sqlite);
  // The backoff grows with the deliveries since the last retry, as the budget does.
  const since = attempt - (s.base.get(callId)?.attempt_base ?? 0);
  const delay = backoffDelay(since, { firstMs: options.backoffMs, maxMs: options.backoffMaxMs, random: options.random });
  const row = s.fail.get(callId, attempt, options.maxAttempts, options.now + delay, options.error.slice(0, 2000));
  return row ? row.state : null;
}

/** Moves lease_until to `until` while the caller still holds the lease. */
export function extendLease(sqlite: Database, callId: number, attempt: number, until: number): boolean {
  return statements(sqlite).extend.run(callId, attempt, until).changes === 1;
}

/** Gives an unstarted lease back without spending the attempt. */
export function releaseCall(sqlite: Database, callId: number, attempt: number): boolean {
  return statements(sqlite).release.run(callId, attempt).changes === 1;
}

/**
 * Marks dead the calls whose last lease ran out at `now` (no claim would deliver them again), so
 * that status, metrics and `jobs list` say so, and `jobs retry` takes them, without waiting for a
 * claim that may never come (a pull consumer gone); returns how many.
 */
export function killExpiredLeases(sqlite: Database, now: number, maxAttempts: number): number {
  return statements(sqlite).killExpired.run(now, maxAttempts).changes;
}

/** Deletes done calls finished before `before`; returns how many. */
export function pruneDone(sqlite: Database, before: number): number {
  return statements(sqlite).prune.run(before).changes;
}

/** Body bytes of undelivered (pending or leased) calls. */
export function pendingBytes(sqlite: Database): number {
  const row = sqlite
    .query<{ bytes: number }, []>("SELECT coalesce(sum(length(body)), 0) AS bytes FROM webhook_jobs WHERE state IN ('pending', 'leased')")
    .get();
  return row?.bytes ?? 0;
}
