/**
 * Metering for paid requests without a database write on the request path. Before calling
 * upstream the gate reserves the request's maximum cost in memory; when it ends, settle() releases
 * the reservation and queues the actual cost as a debit, which a flush writes to the ledger in one
 * transaction per batch (every `intervalMs`, at once when `maxBatch` wait), through the write-behind queue.
 *
 * Invariant (this process): available = stored balance - queued debits - open reservations, and
 * flush() commits a batch and forgets its queued amounts in the same synchronous step, so no
 * request ever sees a debit twice or not at all. A batch that fails to write stays queued and is
 * retried; nothing is dropped. Overdraw bound: see the README (Credits).
 */
import type { Db } from "../db/client";
import { createWriteBehind } from "../db/write-behind";
import { createDebitWriter, type Debit } from "./ledger";

export interface Hold {
  readonly userId: number;
  readonly micro: number;
  settled: boolean;
}

export interface CreditMeter {
  /** Micro-credits a user may still spend, given their stored balance. */
  available(userId: number, storedBalance: number): number;
  reserve(userId: number, micro: number): Hold;
  /** Releases the hold and debits `costMicro` (0 for nothing). Idempotent per hold. */
  settle(hold: Hold, debit: { costMicro: number; requestId: string; model: string; at: number }): void;
  /** Reserved plus queued micro-credits for a user (tests, dashboard). */
  outstanding(userId: number): number;
  flush(): void;
  close(): void;
}

export function createCreditMeter(db: Db, options: { intervalMs?: number; maxBatch?: number } = {}): CreditMeter {
  const reserved = new Map<number, number>();
  const queued = new Map<number, number>();
  const writeDebits = createDebitWriter(db);

  function adjust(map: Map<number, number>, userId: number, delta: number): void {
    const next = (map.get(userId) ?? 0) + delta;
    if (next === 0) map.delete(userId);
    else map.set(userId, next);
  }

  // Written debits stop counting as queued in the same synchronous step; a failed batch stays queued.
  const debits = createWriteBehind<Debit>(
    (batch) => {
      writeDebits(batch);
      for (const d of batch) adjust(queued, d.userId, -d.micro);
    },
    { label: "credits", intervalMs: options.intervalMs, maxBatch: options.maxBatch, keepFailed: true },
  );

  return {
    available(userId, storedBalance) {
      return storedBalance - (queued.get(userId) ?? 0) - (reserved.get(userId) ?? 0);
    },
    reserve(userId, micro) {
      adjust(reserved, userId, micro);
      return { userId, micro, settled: false };
    },
    settle(hold, debit) {
      if (hold.settled) return;
      hold.settled = true;
      adjust(reserved, hold.userId, -hold.micro);
      if (debit.costMicro <= 0) return;
      adjust(queued, hold.userId, debit.costMicro);
      debits.push({ userId: hold.userId, micro: debit.costMicro, requestId: debit.requestId, model: debit.model, at: debit.at });
    },
    outstanding: (userId) => (reserved.get(userId) ?? 0) + (queued.get(userId) ?? 0),
    flush: debits.flush,
    close: debits.close,
  };
}
