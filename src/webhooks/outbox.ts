/**
 * The durable outbox: its own SQLite connection to modelgate.db with `synchronous = FULL` (the
 * main connection keeps NORMAL), and a group committer. Every write (append, claim, ack, fail,
 * extend) is queued; all writes queued in one event-loop turn run in a single IMMEDIATE
 * transaction, so concurrent requests share one WAL fsync. A promise resolves only after its
 * transaction has committed, which is what lets the gateway answer 202 only for durable rows.
 * When the commit fails (read-only or full disk, lock timeout) every write of the batch rejects
 * and nothing of it is kept.
 * The bodies of calls not yet delivered may hold at most `maxPendingBytes`: past it an append is
 * refused (OutboxFullError), so a flood of large bodies fills neither the disk nor the runners'
 * backlog. The amount is counted from the table at start and when it matters (at most once a
 * second); an append takes its bytes at once, so appends of one turn see each other, and gives
 * them back if it turns out a redelivery or its commit fails. A redelivery is never refused.
 */
import type { Redact } from "./redact";
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import type { Db } from "../db/client";
import * as schema from "../db/schema";
import {
  ackCall,
  appendCall,
  claimCalls,
  extendLease,
  failCall,
  isDuplicate,
  killExpiredLeases,
  pruneDone,
  releaseCall,
  type AppendInput,
  type AppendResult,
  type ClaimedRow,
  type JobState,
} from "./store";
import { outboxStats, type OutboxStats } from "./admin";

export interface OutboxOptions {
  now?: () => number;
  dedupeWindowMs: number;
  leaseMs: number;
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
  /** The backoff's jitter (../backoff.ts); Math.random unless a test fixes it. */
  random?: () => number;
  /** How long a write waits for another process's lock (e.g. `jobs retry`) before failing. */
  busyTimeoutMs?: number;
  /** The most body bytes of undelivered (pending or leased) calls; default unbounded. */
  maxPendingBytes?: number;
  /** Takes the config's secrets out of a failure's reason before it is stored, whoever reported it. */
  redact?: Redact;
}

export interface ClaimRequest {
  limit?: number;
  leaseMs?: number;
  jobIds?: readonly number[];
}

interface Pending {
  run: () => unknown;
  resolve: (value: any) => void;
  reject: (error: unknown) => void;
}

class OutboxUnavailableError extends Error {
  override name = "OutboxUnavailableError";
}

export class OutboxFullError extends Error {
  override name = "OutboxFullError";
}

/** An append withdrawn at commit time (AppendOptions.withdrawn): nothing was stored. */
export class AppendWithdrawnError extends Error {
  override name = "AppendWithdrawnError";
}

export interface AppendOptions {
  /**
   * Asked in the transaction, just before the row is written: true stores nothing and rejects
   * with AppendWithdrawnError (the sender left before it could be told the call was accepted).
   */
  withdrawn?: () => boolean;
}

const RECOUNT_MS = 1_000;
/** The result of an append withdrawn in its batch (a rejection there would roll back the whole batch). */
const WITHDRAWN = null;

export class Outbox {
  readonly sqlite: Database;
  readonly db: Db;
  readonly now: () => number;
  private queue: Pending[] = [];
  private scheduled = false;
  private listeners = new Set<() => void>();
  private readonly options: OutboxOptions;
  /** Counters since start, for /api/status and the bench. */
  readonly counters = { accepted: 0, duplicates: 0, commits: 0, failedCommits: 0 };
  /** Body bytes of undelivered calls as last counted, plus those appended since; when it was counted. */
  private pendingBytes = 0;
  private countedAt = -Infinity;

  /** `file` is the migrated modelgate.db (openDatabase has created and migrated it). */
  constructor(file: string | Database, options: OutboxOptions) {
    this.sqlite = typeof file === "string" ? new Database(file) : file;
    this.sqlite.run("PRAGMA journal_mode = WAL");
    this.sqlite.run("PRAGMA synchronous = FULL");
    this.sqlite.run(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 2_000}`);
    this.db = drizzle(this.sqlite, { schema }) as Db;
    this.now = options.now ?? Date.now;
    this.options = options;
    if (options.maxPendingBytes !== undefined) this.recount();
  }

  /** Appends a verified request; resolves after the row is durably committed. */
  append(input: AppendInput, options: AppendOptions = {}): Promise<AppendResult> {
    const max = this.options.maxPendingBytes;
    const bytes = input.body.length;
    if (max !== undefined && this.pendingBytes + bytes > max && this.recount() + bytes > max && !this.redelivery(input)) {
      return Promise.reject(new OutboxFullError(`undelivered calls already hold ${this.pendingBytes} bytes (webhooks.max_pending_bytes = ${max})`));
    }
    this.pendingBytes += bytes;
    const appended = this.write(() => {
      if (options.withdrawn?.()) return WITHDRAWN;
      const result = appendCall(this.sqlite, input, this.now(), this.options.dedupeWindowMs);
      if (result.duplicate) {
        this.counters.duplicates++;
        this.pendingBytes -= bytes;
      } else this.counters.accepted++;
      return result;
    });
    return appended.then(
      (result) => {
        if (result !== WITHDRAWN) return result;
        this.pendingBytes -= bytes;
        throw new AppendWithdrawnError("withdrawn before commit");
      },
      (error: unknown) => {
        this.pendingBytes -= bytes;
        throw error;
      },
    );
  }

  private redelivery(input: AppendInput): boolean {
    return input.dedupeKey !== null && isDuplicate(this.sqlite, input.dedupeKey, this.now(), this.options.dedupeWindowMs);
  }

  /** Counts the undelivered bodies again, at most once per RECOUNT_MS (deliveries lower it meanwhile). */
  private recount(): number {
    const now = this.now();
    if (now - this.countedAt < RECOUNT_MS) return this.pendingBytes;
    this.countedAt = now;
    const row = this.sqlite
      .query<{ bytes: number }, []>("SELECT coalesce(sum(length(body)), 0) AS bytes FROM webhook_jobs WHERE state IN ('pending', 'leased')")
      .get();
    this.pendingBytes = row?.bytes ?? 0;
    return this.pendingBytes;
  }

  claim(request: ClaimRequest = {}): Promise<ClaimedRow[]> {
    return this.write(() =>
      claimCalls(this.sqlite, {
        now: this.now(),
        leaseMs: request.leaseMs ?? this.options.leaseMs,
        maxAttempts: this.options.maxAttempts,
        limit: request.limit ?? 1,
        jobIds: request.jobIds,
      }),
    );
  }

  ack(callId: number, attempt: number): Promise<boolean> {
    return this.write(() => ackCall(this.sqlite, callId, attempt, this.now()));
  }

  fail(callId: number, attempt: number, error: string): Promise<JobState | null> {
    return this.write(() =>
      failCall(this.sqlite, callId, attempt, {
        now: this.now(),
        maxAttempts: this.options.maxAttempts,
        backoffMs: this.options.backoffMs,
        backoffMaxMs: this.options.backoffMaxMs,
        random: this.options.random,
        error: this.options.redact ? this.options.redact(error) : error,
      }),
    );
  }

  extend(callId: number, attempt: number, leaseMs?: number): Promise<number | null> {
    return this.write(() => {
      const until = this.now() + (leaseMs ?? this.options.leaseMs);
      return extendLease(this.sqlite, callId, attempt, until) ? until : null;
    });
  }

  release(callId: number, attempt: number): Promise<boolean> {
    return this.write(() => releaseCall(this.sqlite, callId, attempt));
  }

  /**
   * Runs `run` in the next group commit, beside the outbox's own writes (a triage job's rows):
   * resolves after it committed, rejects (and keeps nothing of it) when the commit fails.
   */
  transact<T>(run: () => T): Promise<T> {
    return this.write(run);
  }

  /** Marks dead the calls whose last lease has run out (see killExpiredLeases in ./store.ts). */
  killExpiredLeases(): Promise<number> {
    return this.write(() => killExpiredLeases(this.sqlite, this.now(), this.options.maxAttempts));
  }

  prune(retainMs: number): Promise<number> {
    return this.write(() => pruneDone(this.sqlite, this.now() - retainMs));
  }

  stats(): OutboxStats {
    return outboxStats(this.db, this.now());
  }

  /** Called after every commit that appended rows; producers wait on this instead of polling. */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Runs whatever is queued now (shutdown, tests). */
  flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    if (batch.length === 0) return;
    this.queue = [];
    const results: unknown[] = new Array(batch.length);
    const before = this.counters.accepted;
    const beforeDuplicates = this.counters.duplicates;
    try {
      this.sqlite
        .transaction(() => {
          for (let i = 0; i < batch.length; i++) results[i] = batch[i].run();
        })
        .immediate();
    } catch (error) {
      this.counters.failedCommits++;
      this.counters.accepted = before;
      this.counters.duplicates = beforeDuplicates;
      const reason = new OutboxUnavailableError(`outbox write failed: ${(error as Error)?.message ?? error}`);
      for (const item of batch) item.reject(reason);
      return;
    }
    this.counters.commits++;
    for (let i = 0; i < batch.length; i++) batch[i].resolve(results[i]);
    if (this.counters.accepted !== before) for (const listener of this.listeners) listener();
  }

  close(): void {
    this.flush();
    this.listeners.clear();
    this.sqlite.close();
  }

  private write<T>(run: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }
}
