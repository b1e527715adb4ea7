/**
 * The outbox on SQLite: its own connection to modelgate.db with `synchronous = FULL` (the main
 * connection keeps NORMAL), and a group committer. Every write (append, claim, ack, fail, extend)
 * is queued; all writes queued in one event-loop turn run in a single IMMEDIATE transaction, so
 * concurrent requests share one WAL fsync. A promise resolves only after its transaction has
 * committed, which is what lets the gateway answer 202 only for durable rows. When the commit
 * fails (read-only or full disk, lock timeout) every write of the batch rejects and nothing of it
 * is kept.
 */
import { Database } from "bun:sqlite";
import { drizzle } from "drizzle-orm/bun-sqlite";
import type { Db } from "../db/client";
import { sqliteOf } from "../db/engine";
import * as schema from "../db/schema";
import { OutboxUnavailableError, type EngineOptions, type OutboxEngine } from "./calls";
import { ackCall, appendCall, claimCalls, extendLease, failCall, isDuplicate, killExpiredLeases, pendingBytes, pruneDone, releaseCall } from "./store";

interface Pending {
  run: () => unknown;
  resolve: (value: any) => void;
  reject: (error: unknown) => void;
}

/** `file` is the migrated modelgate.db (openDatabase has created and migrated it). */
export function sqliteEngine(file: string | Database, options: EngineOptions & { busyTimeoutMs?: number }): OutboxEngine {
  const sqlite = typeof file === "string" ? new Database(file) : file;
  sqlite.run("PRAGMA journal_mode = WAL");
  sqlite.run("PRAGMA synchronous = FULL");
  sqlite.run(`PRAGMA busy_timeout = ${options.busyTimeoutMs ?? 2_000}`);
  const db = drizzle(sqlite, { schema }) as Db;
  const { now, dedupeWindowMs, events } = options;
  let queue: Pending[] = [];
  let scheduled = false;

  const flush = (): void => {
    scheduled = false;
    const batch = queue;
    if (batch.length === 0) return;
    queue = [];
    const results: unknown[] = new Array(batch.length);
    try {
      sqlite
        .transaction(() => {
          for (let i = 0; i < batch.length; i++) results[i] = batch[i].run();
        })
        .immediate();
    } catch (error) {
      events.failed();
      const reason = new OutboxUnavailableError(`outbox write failed: ${(error as Error)?.message ?? error}`);
      for (const item of batch) item.reject(reason);
      return;
    }
    let appended = false;
    for (let i = 0; i < batch.length; i++) {
      const result = results[i] as { duplicate?: boolean } | null;
      if (result !== null && result?.duplicate === false) appended = true;
      batch[i].resolve(results[i]);
    }
    events.committed(appended);
  };

  const write = <T>(run: () => T): Promise<T> =>
    new Promise<T>((resolve, reject) => {
      queue.push({ run, resolve, reject });
      if (!scheduled) {
        scheduled = true;
        setImmediate(flush);
      }
    });

  return {
    db,
    append: (input, withdrawn) => write(() => (withdrawn?.() ? null : appendCall(sqlite, input, now(), dedupeWindowMs))),
    isDuplicate: (dedupeKey) => isDuplicate(sqlite, dedupeKey, now(), dedupeWindowMs),
    pendingBytes: () => pendingBytes(sqlite),
    claim: (claim) => write(() => claimCalls(sqlite, claim)),
    ack: (callId, attempt, at) => write(() => ackCall(sqlite, callId, attempt, at)),
    fail: (callId, attempt, failure) => write(() => failCall(sqlite, callId, attempt, failure)),
    extend: (callId, attempt, until) => write(() => extendLease(sqlite, callId, attempt, until)),
    release: (callId, attempt) => write(() => releaseCall(sqlite, callId, attempt)),
    ackIn: async (tx, callId, attempt, at) => ackCall(sqliteOf(tx, "the outbox's SQLite engine"), callId, attempt, at),
    killExpiredLeases: (at, maxAttempts) => write(() => killExpiredLeases(sqlite, at, maxAttempts)),
    pruneDone: (before) => write(() => pruneDone(sqlite, before)),
    flush,
    async close() {
      flush();
      sqlite.close();
    },
  };
}
