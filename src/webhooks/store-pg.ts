/**
 * The outbox table's operations on Postgres, over Bun.sql (prepared and cached by it), for
 * replicas sharing one database. What they keep true is in ./calls.ts; how, here:
 * - A batch of appends is one multi-row INSERT … ON CONFLICT (dedupe_key) DO NOTHING RETURNING
 *   call_id: the identity sequence numbers the calls, and the unique index on dedupe_key decides
 *   which of two replicas stores a redelivery (the other is answered with the stored call_id).
 * - A claim is one UPDATE of the rows a `SELECT … FOR UPDATE SKIP LOCKED` picked: two replicas
 *   claiming at once lock disjoint rows, and a row another claim has just leased is skipped or,
 *   once its lease is seen, no longer due. The same statement marks dead the calls whose last
 *   lease ran out, so they never take a place in the limit.
 * - ack, fail, extend and release are single UPDATEs fenced by the attempt number.
 * Postgres hands bigint columns back as strings: every one read is made a number here. Its text
 * cannot hold NUL, which SQLite's dedupe keys put between the path and the delivery id: here a
 * space stands there (../db/dedupe-key.ts).
 */
import type { SQL } from "bun";
import { backoffDelay } from "../backoff";
import { postgresDedupeKey } from "../db/dedupe-key";
import type { AppendInput, AppendResult, ClaimedRow, ClaimOptions, FailOptions, JobState } from "./calls";

/** Rows per INSERT: 9 parameters each, well under Postgres' 65,535 per statement. */
const ROWS_PER_INSERT = 1_000;

interface RawRow {
  call_id: string;
  job_id: string;
  service_id: string;
  path: string;
  name: string | null;
  body: Uint8Array;
  content_type: string | null;
  headers: string | null;
  attempts: string;
  lease_until: string;
  created_at: string;
}

/**
 * Appends `inputs` (one group commit) and returns one result per input, in order. A key given
 * twice in the batch folds into its first; a key stored longer ago than the window is first
 * taken off its old row, so the new call stores it.
 */
export async function appendCalls(sql: SQL, given: readonly AppendInput[], now: number, dedupeWindowMs: number): Promise<AppendResult[]> {
  const inputs = given.map((input) => (input.dedupeKey === null ? input : { ...input, dedupeKey: postgresDedupeKey(input.dedupeKey) }));
  const results: Array<AppendResult | undefined> = new Array(inputs.length);
  const firstOfKey = new Map<string, number>();
  const fresh: number[] = [];
  inputs.forEach((input, i) => {
    if (input.dedupeKey === null) fresh.push(i);
    else if (!firstOfKey.has(input.dedupeKey)) {
      firstOfKey.set(input.dedupeKey, i);
      fresh.push(i);
    }
  });
  const keys = [...firstOfKey.keys()];
  if (keys.length > 0) await sql`UPDATE webhook_jobs SET dedupe_key = NULL WHERE dedupe_key = ANY(${keys}) AND created_at <= ${now - dedupeWindowMs}`;
  const byKey = new Map<string, AppendResult>();
  for (let start = 0; start < fresh.length; start += ROWS_PER_INSERT) {
    const chunk = fresh.slice(start, start + ROWS_PER_INSERT);
    const rows = chunk.map((i) => rowOf(inputs[i], now));
    const inserted = (await sql`INSERT INTO webhook_jobs ${sql(rows)} ON CONFLICT (dedupe_key) DO NOTHING RETURNING call_id, dedupe_key`) as Array<{
      call_id: string;
      dedupe_key: string | null;
    }>;
    // The sequence numbers a statement's rows in the order given: sorted, the unkeyed ones line up.
    const unkeyed = inserted.filter((r) => r.dedupe_key === null).map((r) => Number(r.call_id));
    unkeyed.sort((a, b) => a - b);
    for (const r of inserted) if (r.dedupe_key !== null) byKey.set(r.dedupe_key, { callId: Number(r.call_id), duplicate: false });
    let next = 0;
    for (const i of chunk) if (inputs[i].dedupeKey === null) results[i] = { callId: unkeyed[next++], duplicate: false };
  }
  const taken = keys.filter((key) => !byKey.has(key));
  if (taken.length > 0) {
    const stored = (await sql`SELECT call_id, dedupe_key FROM webhook_jobs WHERE dedupe_key = ANY(${taken})`) as Array<{ call_id: string; dedupe_key: string }>;
    for (const r of stored) byKey.set(r.dedupe_key, { callId: Number(r.call_id), duplicate: true });
  }
  inputs.forEach((input, i) => {
    if (input.dedupeKey === null) return;
    const found = byKey.get(input.dedupeKey);
    // Stored under the key by another replica and already out of the window: rare; the caller may send again.
    if (!found) throw new Error("the call under this delivery id changed while it was stored; send it again");
    results[i] = firstOfKey.get(input.dedupeKey) === i ? found : { callId: found.callId, duplicate: true };
  });
  return results as AppendResult[];
}

function rowOf(input: AppendInput, now: number): Record<string, unknown> {
  return {
    job_id: input.jobId,
    service_id: input.serviceId,
    path: input.path,
    name: input.name,
    body: Buffer.from(input.body.buffer, input.body.byteOffset, input.body.byteLength),
    content_type: input.contentType,
    headers: input.headers ?? null,
    dedupe_key: input.dedupeKey,
    created_at: now,
  };
}

/** Whether `dedupeKey` names a call stored within the window. */
export async function isDuplicate(sql: SQL, dedupeKey: string, now: number, dedupeWindowMs: number): Promise<boolean> {
  const [row] = (await sql`SELECT created_at FROM webhook_jobs WHERE dedupe_key = ${postgresDedupeKey(dedupeKey)}`) as Array<{ created_at: string }>;
  return row !== undefined && Number(row.created_at) > now - dedupeWindowMs;
}

export async function pendingBytes(sql: SQL): Promise<number> {
  const [row] = (await sql`SELECT coalesce(sum(length(body)), 0) AS bytes FROM webhook_jobs WHERE state IN ('pending', 'leased')`) as Array<{ bytes: string }>;
  return Number(row?.bytes ?? 0);
}

/** Leases up to `limit` due calls, oldest first, none held by another claim (see the header). */
export async function claimCalls(sql: SQL, options: ClaimOptions): Promise<ClaimedRow[]> {
  const { now, maxAttempts } = options;
  const jobIds = options.jobIds ? [...options.jobIds] : null;
  const rows = (await sql`
    WITH dead AS (
      UPDATE webhook_jobs SET state = 'dead', lease_until = NULL,
        last_error = 'lease expired on attempt ' || (attempts - attempt_base) || ' of ' || ${maxAttempts}::bigint
      WHERE state = 'leased' AND lease_until <= ${now} AND attempts - attempt_base >= ${maxAttempts}
    )
    UPDATE webhook_jobs SET state = 'leased', attempts = attempts + 1, lease_until = ${now + options.leaseMs}
    WHERE call_id IN (
      SELECT call_id FROM webhook_jobs
      WHERE ((state = 'pending' AND next_attempt_at <= ${now})
          OR (state = 'leased' AND lease_until <= ${now} AND attempts - attempt_base < ${maxAttempts}))
        AND (${jobIds}::bigint[] IS NULL OR job_id = ANY(${jobIds}::bigint[]))
      ORDER BY call_id LIMIT ${options.limit}
      FOR UPDATE SKIP LOCKED)
    RETURNING call_id, job_id, service_id, path, name, body, content_type, headers, attempts, lease_until, created_at`) as RawRow[];
  return rows.map(toClaimed).sort((a, b) => a.callId - b.callId);
}

function toClaimed(row: RawRow): ClaimedRow {
  return {
    callId: Number(row.call_id),
    jobId: Number(row.job_id),
    serviceId: Number(row.service_id),
    path: row.path,
    name: row.name,
    body: row.body,
    contentType: row.content_type,
    headers: row.headers,
    attempt: Number(row.attempts),
    leaseUntil: Number(row.lease_until),
    createdAt: Number(row.created_at),
  };
}

/** Marks a leased call done; false when the lease was lost. `sql` may be a transaction's. */
export async function ackCall(sql: SQL, callId: number, attempt: number, now: number): Promise<boolean> {
  const result = await sql`UPDATE webhook_jobs SET state = 'done', done_at = ${now}, lease_until = NULL, last_error = NULL
    WHERE call_id = ${callId} AND state = 'leased' AND attempts = ${attempt}`;
  return result.count === 1;
}

/** Returns the call to pending after a backoff, or dead when out of attempts; null if lease lost. */
export async function failCall(sql: SQL, callId: number, attempt: number, options: FailOptions): Promise<JobState | null> {
  const [base] = (await sql`SELECT attempt_base FROM webhook_jobs WHERE call_id = ${callId}`) as Array<{ attempt_base: string }>;
  // The backoff grows with the deliveries since the last retry, as the budget does.
  const since = attempt - Number(base?.attempt_base ?? 0);
  const delay = backoffDelay(since, { firstMs: options.backoffMs, maxMs: options.backoffMaxMs, random: options.random });
  const [row] = (await sql`UPDATE webhook_jobs
    SET state = CASE WHEN attempts - attempt_base >= ${options.maxAttempts} THEN 'dead' ELSE 'pending' END,
        next_attempt_at = ${options.now + delay}, lease_until = NULL, last_error = ${options.error.slice(0, 2000)}
    WHERE call_id = ${callId} AND state = 'leased' AND attempts = ${attempt}
    RETURNING state`) as Array<{ state: JobState }>;
  return row ? row.state : null;
}

export async function extendLease(sql: SQL, callId: number, attempt: number, until: number): Promise<boolean> {
  const result = await sql`UPDATE webhook_jobs SET lease_until = ${until} WHERE call_id = ${callId} AND state = 'leased' AND attempts = ${attempt}`;
  return result.count === 1;
}

/** Gives an unstarted lease back: the attempt returns to the budget, not its number. */
export async function releaseCall(sql: SQL, callId: number, attempt: number): Promise<boolean> {
  const result = await sql`UPDATE webhook_jobs SET state = 'pending', attempt_base = attempt_base + 1, lease_until = NULL
    WHERE call_id = ${callId} AND state = 'leased' AND attempts = ${attempt}`;
  return result.count === 1;
}

export async function killExpiredLeases(sql: SQL, now: number, maxAttempts: number): Promise<number> {
  const result = await sql`UPDATE webhook_jobs SET state = 'dead', lease_until = NULL,
      last_error = 'lease expired on attempt ' || (attempts - attempt_base) || ' of ' || ${maxAttempts}::bigint
    WHERE state = 'leased' AND lease_until <= ${now} AND attempts - attempt_base >= ${maxAttempts}`;
  return result.count;
}

export async function pruneDone(sql: SQL, before: number): Promise<number> {
  return (await sql`DELETE FROM webhook_jobs WHERE state = 'done' AND done_at < ${before}`).count;
}
