/**
 * The durable outbox: what the gateway, the job runners, the pull API and triage call, over one
 * engine's storage (./outbox-sqlite.ts: the server's own SQLite file; ./outbox-postgres.ts: the
 * Postgres database replicas share). Every write has committed when its promise resolves.
 * The bodies of calls not yet delivered may hold at most `maxPendingBytes`: past it an append is
 * refused (OutboxFullError), so a flood of large bodies fills neither the disk nor the runners'
 * backlog. The amount is counted from the table at start and when it matters (at most once a
 * second); an append takes its bytes at once, so appends of one turn see each other, and gives
 * them back if it turns out a redelivery or its commit fails. A redelivery is never refused.
 * On Postgres the count covers every replica's calls, and a replica counts again before an append
 * once its count is a second old, whether or not it is near the bound: other replicas' appends
 * would not show otherwise.
 */
import type { Database } from "bun:sqlite";
import type { Redact } from "./redact";
import type { Db } from "../db/client";
import { engineOf, sqliteOf } from "../db/engine";
import type { AppendInput, AppendResult, ClaimedRow, JobState, OutboxEngine } from "./calls";
import { outboxStats, type OutboxStats } from "./admin";
import { sqliteEngine } from "./outbox-sqlite";
import { postgresEngine } from "./outbox-postgres";

export interface OutboxOptions {
  now?: () => number;
  dedupeWindowMs: number;
  leaseMs: number;
  maxAttempts: number;
  backoffMs: number;
  backoffMaxMs: number;
  /** The backoff's jitter (../backoff.ts); Math.random unless a test fixes it. */
  random?: () => number;
  /** On SQLite, how long a write waits for another process's lock (e.g. `jobs retry`) before failing. */
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

export class OutboxFullError extends Error {
  override name = "OutboxFullError";
}

/** An append withdrawn at commit time (AppendOptions.withdrawn): nothing was stored. */
export class AppendWithdrawnError extends Error {
  override name = "AppendWithdrawnError";
}

export interface AppendOptions {
  /**
   * Asked just before the row is written: true stores nothing and rejects with
   * AppendWithdrawnError (the sender left before it could be told the call was accepted).
   */
  withdrawn?: () => boolean;
}

const RECOUNT_MS = 1_000;

function isHandle(at: string | Database | Db): at is Db {
  return typeof at === "object" && "select" in at;
}

export class Outbox {
  /** On SQLite the outbox's own connection (synchronous = FULL); on Postgres the shared handle. */
  readonly db: Db;
  readonly now: () => number;
  private readonly engine: OutboxEngine;
  /** Other processes append to the same table (Postgres replicas). */
  private readonly shared: boolean;
  private listeners = new Set<() => void>();
  private readonly options: OutboxOptions;
  /** Counters since start, for /api/status and the bench. */
  readonly counters = { accepted: 0, duplicates: 0, commits: 0, failedCommits: 0 };
  /** Body bytes of undelivered calls as last counted, plus those appended since; when it was counted. */
  private pendingBytes = 0;
  private countedAt = -Infinity;
  /** A count under way (Postgres). */
  private counting: Promise<void> | null = null;
  /** The stats last read (status, sweeps), for the /metrics gauge, which cannot wait for a query. */
  private lastStats: OutboxStats | null = null;

  /** `at` is the migrated modelgate.db (a path or a connection to it), or a Postgres handle. */
  constructor(at: string | Database | Db, options: OutboxOptions) {
    this.now = options.now ?? Date.now;
    this.options = options;
    const events = {
      committed: (appended: boolean) => {
        this.counters.commits++;
        if (appended) for (const listener of this.listeners) listener();
      },
      failed: () => void this.counters.failedCommits++,
    };
    const engine = { now: this.now, dedupeWindowMs: options.dedupeWindowMs, events };
    const sqlite = { ...engine, busyTimeoutMs: options.busyTimeoutMs };
    if (!isHandle(at)) this.engine = sqliteEngine(at, sqlite);
    else this.engine = engineOf(at) === "postgres" ? postgresEngine(at, engine) : sqliteEngine(sqliteOf(at, "Outbox").filename, sqlite);
    this.db = this.engine.db;
    this.shared = engineOf(this.db) === "postgres";
    if (options.maxPendingBytes !== undefined) void this.recount();
  }

  /** The SQLite connection under the outbox (tests reach past the API with it); throws on Postgres. */
  get sqlite(): Database {
    return sqliteOf(this.db, "Outbox.sqlite");
  }

  /** Appends a verified request; resolves after the row is durably committed. */
  async append(input: AppendInput, options: AppendOptions = {}): Promise<AppendResult> {
    const max = this.options.maxPendingBytes;
    const bytes = input.body.length;
    if (max !== undefined) {
      if (this.counting) await this.counting;
      if (this.pendingBytes + bytes > max || (this.shared && this.now() - this.countedAt >= RECOUNT_MS)) {
        const counting = this.recount();
        if (counting) await counting;
        if (this.pendingBytes + bytes > max && !(input.dedupeKey !== null && (await this.engine.isDuplicate(input.dedupeKey)))) {
          throw new OutboxFullError(`undelivered calls already hold ${this.pendingBytes} bytes (webhooks.max_pending_bytes = ${max})`);
        }
      }
    }
    this.pendingBytes += bytes;
    let result: AppendResult | null;
    try {
      result = await this.engine.append(input, options.withdrawn);
    } catch (error) {
      this.pendingBytes -= bytes;
      throw error;
    }
    if (result === null) {
      this.pendingBytes -= bytes;
      throw new AppendWithdrawnError("withdrawn before commit");
    }
    if (result.duplicate) {
      this.counters.duplicates++;
      this.pendingBytes -= bytes;
    } else this.counters.accepted++;
    return result;
  }

  /**
   * Counts the undelivered bodies again, at most once per RECOUNT_MS (deliveries lower it
   * meanwhile): at once on SQLite, else a promise appends wait for. A failed count keeps the last.
   */
  private recount(): Promise<void> | undefined {
    if (this.counting) return this.counting;
    const now = this.now();
    if (now - this.countedAt < RECOUNT_MS) return;
    this.countedAt = now;
    const counted = this.engine.pendingBytes();
    if (typeof counted === "number") {
      this.pendingBytes = counted;
      return;
    }
    this.counting = counted
      .then(
        (n) => void (this.pendingBytes = n),
        () => undefined,
      )
      .finally(() => void (this.counting = null));
    return this.counting;
  }

  claim(request: ClaimRequest = {}): Promise<ClaimedRow[]> {
    return this.engine.claim({
      now: this.now(),
      leaseMs: request.leaseMs ?? this.options.leaseMs,
      maxAttempts: this.options.maxAttempts,
      limit: request.limit ?? 1,
      jobIds: request.jobIds,
    });
  }

  ack(callId: number, attempt: number): Promise<boolean> {
    return this.engine.ack(callId, attempt, this.now());
  }

  /** Acks inside `tx`, a transaction (../db/engine.ts transact) on this outbox's `db`. */
  ackIn(tx: Db, callId: number, attempt: number): Promise<boolean> {
    return this.engine.ackIn(tx, callId, attempt, this.now());
  }

  fail(callId: number, attempt: number, error: string): Promise<JobState | null> {
    return this.engine.fail(callId, attempt, {
      now: this.now(),
      maxAttempts: this.options.maxAttempts,
      backoffMs: this.options.backoffMs,
      backoffMaxMs: this.options.backoffMaxMs,
      random: this.options.random,
      error: this.options.redact ? this.options.redact(error) : error,
    });
  }

  async extend(callId: number, attempt: number, leaseMs?: number): Promise<number | null> {
    const until = this.now() + (leaseMs ?? this.options.leaseMs);
    return (await this.engine.extend(callId, attempt, until)) ? until : null;
  }

  release(callId: number, attempt: number): Promise<boolean> {
    return this.engine.release(callId, attempt);
  }

  /** Marks dead the calls whose last lease has run out (see killExpiredLeases in ./store.ts). */
  killExpiredLeases(): Promise<number> {
    return this.engine.killExpiredLeases(this.now(), this.options.maxAttempts);
  }

  prune(retainMs: number): Promise<number> {
    return this.engine.pruneDone(this.now() - retainMs);
  }

  async stats(): Promise<OutboxStats> {
    this.lastStats = await outboxStats(this.db, this.now());
    return this.lastStats;
  }

  /** The stats last read, without a query; null before the first read. */
  recentStats(): OutboxStats | null {
    return this.lastStats;
  }

  /** Called after every commit that appended rows; producers wait on this instead of polling. */
  onAppend(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Writes whatever is queued now (shutdown, tests). */
  flush(): void {
    this.engine.flush();
  }

  async close(): Promise<void> {
    await this.engine.close();
    this.listeners.clear();
  }
}
