/**
 * The outbox on Postgres, shared by every replica. Appends are group committed: those asked for
 * in one event-loop turn, and any that arrive while a batch is being written, go together as one
 * multi-row INSERT (./store-pg.ts), and each promise resolves once that statement has committed,
 * so the gateway answers 202 only for durable rows. One batch is written at a time. A batch that
 * fails rejects every append in it and stores none. Claims, acks and the rest are single
 * statements of their own, run at once on the pool: Postgres' row locks, not a queue of ours,
 * keep replicas from holding one call twice.
 */
import type { SQL } from "bun";
import type { Db } from "../db/client";
import { postgresOf } from "../db/engine";
import { OutboxUnavailableError, type AppendInput, type AppendResult, type EngineOptions, type OutboxEngine } from "./calls";
import * as store from "./store-pg";

interface Waiting {
  input: AppendInput;
  withdrawn?: () => boolean;
  resolve: (result: AppendResult | null) => void;
  reject: (error: unknown) => void;
}

export function postgresEngine(db: Db, options: EngineOptions): OutboxEngine {
  const sql = postgresOf(db);
  if (!sql) throw new Error("postgresEngine needs a Postgres handle");
  const { now, dedupeWindowMs, events } = options;
  let queue: Waiting[] = [];
  let scheduled = false;
  let writing: Promise<void> | null = null;

  /** Writes batches until none is waiting. */
  const writeAll = async (): Promise<void> => {
    while (queue.length > 0) {
      const taken = queue;
      queue = [];
      const batch: Waiting[] = [];
      for (const waiting of taken) {
        if (waiting.withdrawn?.()) waiting.resolve(null);
        else batch.push(waiting);
      }
      if (batch.length === 0) continue;
      let results: AppendResult[];
      try {
        results = await store.appendCalls(
          sql,
          batch.map((w) => w.input),
          now(),
          dedupeWindowMs,
        );
      } catch (error) {
        events.failed();
        const reason = new OutboxUnavailableError(`outbox write failed: ${(error as Error)?.message ?? error}`);
        for (const waiting of batch) waiting.reject(reason);
        continue;
      }
      batch.forEach((waiting, i) => waiting.resolve(results[i]));
      events.committed(results.some((r) => !r.duplicate));
    }
  };

  const flush = (): void => {
    scheduled = false;
    if (writing !== null || queue.length === 0) return;
    writing = writeAll().finally(() => {
      writing = null;
      flush(); // appends made between the last batch and this
    });
  };

  return {
    db,
    append: (input, withdrawn) =>
      new Promise((resolve, reject) => {
        queue.push({ input, withdrawn, resolve, reject });
        if (!scheduled && writing === null) {
          scheduled = true;
          setImmediate(flush);
        }
      }),
    isDuplicate: (dedupeKey) => store.isDuplicate(sql, dedupeKey, now(), dedupeWindowMs),
    pendingBytes: () => store.pendingBytes(sql),
    claim: (claim) => store.claimCalls(sql, claim),
    ack: (callId, attempt, at) => store.ackCall(sql, callId, attempt, at),
    fail: (callId, attempt, failure) => store.failCall(sql, callId, attempt, failure),
    extend: (callId, attempt, until) => store.extendLease(sql, callId, attempt, until),
    release: (callId, attempt) => store.releaseCall(sql, callId, attempt),
    ackIn: (tx, callId, attempt, at) => store.ackCall(postgresOf(tx) as SQL, callId, attempt, at),
    killExpiredLeases: (at, maxAttempts) => store.killExpiredLeases(sql, at, maxAttempts),
    pruneDone: (before) => store.pruneDone(sql, before),
    flush,
    async close() {
      flush();
      while (writing !== null) await writing;
    },
  };
}
