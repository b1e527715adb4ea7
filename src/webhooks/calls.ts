/**
 * What a webhook call is in the outbox (webhook_jobs, src/db/schema/webhooks.ts), and what each database
 * engine's outbox must do with it: ./outbox-sqlite.ts over ./store.ts, ./outbox-postgres.ts over
 * ./store-pg.ts. ./outbox.ts drives either one.
 *
 * Invariants, on both engines:
 * - call_id is unique and increasing across restarts, pruning and replicas (SQLite's AUTOINCREMENT
 *   row id; Postgres' identity sequence, which may leave gaps).
 * - A row is claimable when pending and due, or leased with an expired lease_until (the lease
 *   runs from the claim, never from created_at, so a long-queued job is not requeued while it
 *   runs). A claim increments `attempts`; ack/fail/extend must present the attempt they hold,
 *   which fences a consumer whose lease was taken over. `attempts` only ever rises (a retry
 *   keeps it), so no attempt number is handed out twice. One claim holds a call at a time.
 * - After max_attempts deliveries since the last retry (attempts - attempt_base; a release gives
 *   one back) a failed or abandoned row becomes `dead` and stays until `jobs retry`; so does one
 *   whose last lease ran out (killExpiredLeases, and any claim).
 * - A dedupe key names one row: the unique index on dedupe_key decides between replicas.
 */
import type { Db } from "../db/client";

export type JobState = "pending" | "leased" | "done" | "dead";

export interface AppendInput {
  jobId: number;
  serviceId: number;
  path: string;
  name: string | null;
  body: Uint8Array;
  contentType: string | null;
  /** The allowlisted request headers as JSON (./headers.ts); none when absent. */
  headers?: string | null;
  /** `path NUL delivery-id` when the endpoint dedupes, else null. */
  dedupeKey: string | null;
}

export interface AppendResult {
  callId: number;
  /** True when this was a redelivery inside the dedupe window: callId is the original's. */
  duplicate: boolean;
}

export interface ClaimedRow {
  callId: number;
  jobId: number;
  serviceId: number;
  path: string;
  name: string | null;
  body: Uint8Array;
  contentType: string | null;
  /** The allowlisted request headers as stored (./headers.ts), or null. */
  headers: string | null;
  attempt: number;
  leaseUntil: number;
  createdAt: number;
}

export interface ClaimOptions {
  now: number;
  leaseMs: number;
  maxAttempts: number;
  limit: number;
  /** Only these job ids; all when absent. */
  jobIds?: readonly number[];
}

export interface FailOptions {
  now: number;
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
  /** The backoff's jitter (../backoff.ts); Math.random unless a test fixes it. */
  random?: () => number;
  error: string;
}

/** A write the outbox could not commit (read-only or full disk, a lost database): nothing of it was kept. */
export class OutboxUnavailableError extends Error {
  override name = "OutboxUnavailableError";
}

/** What an engine tells the outbox about its commits (counters, waking producers). */
interface CommitEvents {
  /** A commit went through; `appended` when it stored new calls. */
  committed(appended: boolean): void;
  failed(): void;
}

export interface EngineOptions {
  now: () => number;
  dedupeWindowMs: number;
  events: CommitEvents;
}

/** One engine's outbox operations. Every write has committed when its promise resolves. */
export interface OutboxEngine {
  /** The handle the outbox reads and writes through: on SQLite its own connection (synchronous = FULL). */
  readonly db: Db;
  /** Appends a call in the next group commit; null when `withdrawn` said so just before the write. */
  append(input: AppendInput, withdrawn?: () => boolean): Promise<AppendResult | null>;
  /** Whether `dedupeKey` names a call stored within the window. */
  isDuplicate(dedupeKey: string): boolean | Promise<boolean>;
  /** Body bytes of undelivered (pending or leased) calls. */
  pendingBytes(): number | Promise<number>;
  claim(options: ClaimOptions): Promise<ClaimedRow[]>;
  ack(callId: number, attempt: number, now: number): Promise<boolean>;
  fail(callId: number, attempt: number, options: FailOptions): Promise<JobState | null>;
  extend(callId: number, attempt: number, until: number): Promise<boolean>;
  release(callId: number, attempt: number): Promise<boolean>;
  /** Acks inside `tx`, a transaction on this engine's handle (a triage job's last write). */
  ackIn(tx: Db, callId: number, attempt: number, now: number): Promise<boolean>;
  killExpiredLeases(now: number, maxAttempts: number): Promise<number>;
  pruneDone(before: number): Promise<number>;
  /** Starts whatever is queued now (shutdown, tests). */
  flush(): void;
  close(): Promise<void>;
}
