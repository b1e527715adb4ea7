/**
 * Metering for paid requests. Before calling upstream the gate reserves the request's maximum
 * cost in memory (./reservation.ts); when it ends, settle() releases the reservation and queues the
 * actual cost, at most the reservation, as a debit. Debits are group-committed: every request that
 * settles in one event-loop turn shares one transaction at the end of that turn (flushSoon), and
 * settle() returns the promise of that commit, which the answer's last byte waits for. So an
 * answer a client received in full is in the ledger before it left, and a crash of the process
 * (kill -9) loses no debit while the database accepts writes (WAL, synchronous=NORMAL: a commit
 * is in the WAL file when it returns). On Postgres the batch is one statement sent at the end of the
 * turn, and the promise settle() returns is that statement's commit: the same guarantee, a round
 * trip later. One batch is in flight at a time (../db/write-behind.ts).
 *
 * Invariant (this process): available = stored balance - held, where a user's held amount is
 * their open reservations plus their queued debits (one map: settling a request swaps its
 * reservation for its cost in one step), and a flush commits a batch and takes its amounts off
 * `held` in the same synchronous step, so no request ever sees a debit twice or not at all. On
 * Postgres `held` lets go of a batch in the step after its commit: in between a request may count
 * it twice (refused a little early), never not at all. The same holds per API key (`keyHeld`) for
 * key budgets: a key's spend = its stored debits + keyHeld.
 * A batch that fails to write stays queued and is retried (the answer goes out meanwhile; the gate
 * pauses paid requests once that lasts DEBITS_STALLED_MS); nothing is dropped.
 */
import { brieflyLocked, type Db } from "../db/client";
import { engineOf } from "../db/engine";
import { createWriteBehind } from "../db/write-behind";
import { createDebitWriter, type Debit } from "./ledger";

interface Hold {
  readonly userId: number;
  /** The API key whose budget the hold also counts against, or null. */
  readonly keyId: string | null;
  readonly micro: number;
  settled: boolean;
}

export interface CreditMeter {
  /** Micro-credits a user may still spend, given their stored balance. */
  available(userId: number, storedBalance: number): number;
  reserve(userId: number, micro: number, keyId?: string | null): Hold;
  /**
   * Releases the hold and debits `costMicro` (0 for nothing), never more than the hold. Idempotent
   * per hold. Returns, when there is a debit, the promise of its group commit.
   */
  settle(hold: Hold, debit: { costMicro: number; requestId: string; model: string; at: number }): Promise<void> | void;
  /** A user's held micro-credits: open reservations plus queued debits (tests, dashboard). */
  outstanding(userId: number): number;
  /** The same per API key: what its budget must count besides its stored debits. */
  keyOutstanding(keyId: string): number;
  /** Since when the database has refused the debits (null while they are written). */
  unrecordedSince(): number | null;
  flush(): void | Promise<void>;
  /** Writes the queued debits, retrying for up to `ms` while the database refuses; returns those still unwritten. */
  close(ms?: number): Promise<Debit[]>;
}

export function createCreditMeter(db: Db, options: { intervalMs?: number; maxBatch?: number; now?: () => number } = {}): CreditMeter {
  /** Per user: open reservations plus queued (not yet written) debits, micro-credits. */
  const held = new Map<number, number>();
  /** The same per API key, for key budgets: kept in the same steps as `held`. */
  const keyHeld = new Map<string, number>();
  const writer = createDebitWriter(db);
  const writeDebits = engineOf(db) === "sqlite" ? brieflyLocked(db.$client, writer) : writer;

  // Written out per map, not one generic helper over both key types: each call stays monomorphic on the paid path.
  function adjust(userId: number, keyId: string | null, delta: number): void {
    const next = (held.get(userId) ?? 0) + delta;
    if (next === 0) held.delete(userId);
    else held.set(userId, next);
    if (keyId === null) return;
    const nextForKey = (keyHeld.get(keyId) ?? 0) + delta;
    if (nextForKey === 0) keyHeld.delete(keyId);
    else keyHeld.set(keyId, nextForKey);
  }

  // Written debits stop being held in the step that learns of their commit; a failed batch stays queued.
  const debits = createWriteBehind<Debit>(
    (batch) => {
      const release = (): void => {
        for (const d of batch) adjust(d.userId, d.keyId, -d.micro);
      };
      const written = writeDebits(batch);
      if (written === undefined) return release();
      return written.then(release);
    },
    { label: "credits", intervalMs: options.intervalMs, maxBatch: options.maxBatch, keepFailed: true, now: options.now },
  );

  return {
    available(userId, storedBalance) {
      return storedBalance - (held.get(userId) ?? 0);
    },
    reserve(userId, micro, keyId = null) {
      adjust(userId, keyId, micro);
      return { userId, keyId, micro, settled: false };
    },
    settle(hold, debit) {
      if (hold.settled) return;
      hold.settled = true;
      const cost = Math.min(Math.max(0, debit.costMicro), hold.micro);
      adjust(hold.userId, hold.keyId, cost - hold.micro);
      if (cost === 0) return;
      debits.push({ userId: hold.userId, keyId: hold.keyId, micro: cost, requestId: debit.requestId, model: debit.model, at: debit.at });
      return debits.flushSoon();
    },
    outstanding: (userId) => held.get(userId) ?? 0,
    keyOutstanding: (keyId) => keyHeld.get(keyId) ?? 0,
    unrecordedSince: debits.failingSince,
    flush: debits.flush,
    close: (ms = 0) => debits.closeWithin(ms),
  };
}
