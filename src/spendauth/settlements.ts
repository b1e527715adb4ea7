/**
 * The settlement queue: one row per served SpendAuth authorization, (commitment, nonce) unique.
 * Rows move pending -> authorized -> done, or to dead after the attempt limit or once the
 * authorization has expired (the contract refuses expired ones). Plain functions over a db
 * handle, shared by the worker, /api/status and the CLI.
 */
import { and, asc, desc, eq, inArray, lte, not, or, sql } from "drizzle-orm";
import { brieflyLocked, type Db } from "../db/client";
import { createWriteBehind } from "../db/write-behind";
import { settlements } from "../db/schema";
import { authorizationToJson, EXPIRY_SKEW_S, type SpendAuthorization } from "./header";
import type { Reservations } from "./reservations";

export type SettlementState = "pending" | "authorized" | "done" | "dead";
export const SETTLEMENT_STATES: SettlementState[] = ["pending", "authorized", "done", "dead"];
export type SettlementRow = typeof settlements.$inferSelect;

/**
 * Records a served authorization. A second record of the same authorization is ignored. A new
 * authorization for a (commitment, nonce) whose earlier one expired unclaimed (never authorized
 * on-chain, so the nonce is still unused there) replaces it: the earlier one can never be
 * claimed, the new one can; dropping the new one would leave a served request never paid for.
 */
export function enqueueSettlement(db: Db, auth: SpendAuthorization, requestId: string | null, nowMs: number): void {
  db.$client
    .query(
      `INSERT INTO settlements (commitment, nonce, amount, expiry, authorization, request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (commitment, nonce) DO UPDATE SET amount = excluded.amount, expiry = excluded.expiry,
         authorization = excluded.authorization, request_id = excluded.request_id, created_at = excluded.created_at,
         state = 'pending', attempts = 0, next_attempt_at = 0, last_error = NULL, updated_at = excluded.created_at
       WHERE settlements.auth_hash IS NULL AND settlements.state IN ('pending', 'dead') AND settlements.expiry < excluded.expiry`,
    )
    .run(auth.commitment, auth.nonce.toString(), auth.amount.toString(), Number(auth.expiry), authorizationToJson(auth), requestId, nowMs);
}

interface ServedAuthorization {
  auth: SpendAuthorization;
  requestId: string | null;
  at: number;
}

export interface SettlementWriter {
  /** Writes a served authorization at once; one the database refuses is kept and written behind. */
  push(served: ServedAuthorization): void;
  /** Writes what is kept now (the worker, before it reads the table). */
  flush(): void;
  /** Writes what is kept, retrying for up to `ms` while the database refuses; returns how many are still unwritten. */
  closeWithin(ms: number): Promise<number>;
}

/**
 * Served authorizations, each written before its answer goes out (the router calls answered()
 * first): at the next start a nonce without a row is given back to its client (nonces.ts
 * forgetUnsettled), so a row written behind and lost to a kill would let the answered header be
 * served a second time, and never be claimed. A write waits only a moment for a lock held
 * elsewhere; a row the database refuses is kept and written later, never dropped while the server
 * runs (a lost row is a payment the operator never claims).
 */
export function createSettlementWriter(db: Db, options: { now?: () => number } = {}): SettlementWriter {
  const writeOne = brieflyLocked(db.$client, (row: ServedAuthorization) => enqueueSettlement(db, row.auth, row.requestId, row.at));
  const write = brieflyLocked(
    db.$client,
    db.$client.transaction((rows: ServedAuthorization[]) => {
      for (const row of rows) enqueueSettlement(db, row.auth, row.requestId, row.at);
    }),
  );
  const kept = createWriteBehind<ServedAuthorization>(write, { label: "spend_auth settlements", intervalMs: 250, keepFailed: true, now: options.now });
  return {
    push(served) {
      try {
        writeOne(served);
      } catch {
        kept.push(served);
      }
    },
    flush: kept.flush,
    closeWithin: async (ms) => (await kept.closeWithin(ms)).length,
  };
}

/** SQL: the settlement row `alias` went dead before its spend was authorized on-chain, so its nonce is unused there. */
export function deadUnauthorized(alias: string): string {
  return `${alias}.state = 'dead' AND ${alias}.auth_hash IS NULL`;
}

/** Rows the worker may work on now, oldest nonce of each commitment first. */
export function readySettlements(db: Db, nowMs: number, limit: number): SettlementRow[] {
  // The contract takes a commitment's nonces in order: a pending row waits while an earlier one of
  // its commitment waits out a backoff, or lies dead unauthorized until its client signs it again
  // (tried anyway, it would fail, and its failures would count towards dead). Earlier ones ready
  // now come first in the same pass, and the worker stops at the first that fails. An expired row
  // waits for nothing: it can only be found dead. Nonces are decimal strings: shorter is smaller.
  const earlierWaiting = sql`EXISTS (SELECT 1 FROM settlements e WHERE e.commitment = ${settlements.commitment}
    AND ((e.state = 'pending' AND e.next_attempt_at > ${nowMs}) OR (${sql.raw(deadUnauthorized("e"))}))
    AND (length(e.nonce) < length(${settlements.nonce}) OR (length(e.nonce) = length(${settlements.nonce}) AND e.nonce < ${settlements.nonce})))`;
  const expired = sql`${settlements.expiry} * 1000 < ${nowMs}`;
  return db
    .select()
    .from(settlements)
    .where(
      and(
        inArray(settlements.state, ["pending", "authorized"]),
        lte(settlements.nextAttemptAt, nowMs),
        or(eq(settlements.state, "authorized"), expired, not(earlierWaiting)),
      ),
    )
    .orderBy(asc(settlements.commitment), asc(sql`length(${settlements.nonce})`), asc(settlements.nonce))
    .limit(limit)
    .all();
}

export function updateSettlement(
  db: Db,
  id: number,
  change: Partial<Pick<SettlementRow, "state" | "attempts" | "nextAttemptAt" | "lastError" | "authHash" | "txHash">>,
  nowMs: number,
): void {
  db.update(settlements)
    .set({ ...change, updatedAt: nowMs })
    .where(eq(settlements.id, id))
    .run();
}

export function listSettlements(db: Db, options: { state?: SettlementState; limit?: number } = {}): SettlementRow[] {
  const query = db.select().from(settlements);
  const filtered = options.state ? query.where(eq(settlements.state, options.state)) : query;
  return filtered
    .orderBy(desc(settlements.id))
    .limit(options.limit ?? 100)
    .all();
}

export function settlementCounts(db: Db): Record<SettlementState, number> {
  const counts: Record<SettlementState, number> = { pending: 0, authorized: 0, done: 0, dead: 0 };
  const rows = db.$client.prepare("SELECT state, count(*) AS n FROM settlements GROUP BY state").all() as Array<{ state: SettlementState; n: number }>;
  for (const row of rows) counts[row.state] = row.n;
  return counts;
}

/**
 * Puts a dead settlement back in the queue; false when there is no dead row with this id, or while
 * a newer authorization of its client holds the nonce (a replacement being served: claimed now, the
 * dead one would take the nonce from it, and it would be served for nothing).
 */
export function retrySettlement(db: Db, id: number, nowMs: number): boolean {
  const result = db.$client
    .prepare(`UPDATE settlements SET state = CASE WHEN auth_hash IS NULL THEN 'pending' ELSE 'authorized' END, attempts = 0, next_attempt_at = 0, updated_at = ?
      WHERE id = ? AND state = 'dead' AND NOT EXISTS (SELECT 1 FROM spend_nonces n WHERE n.commitment = settlements.commitment AND n.nonce = settlements.nonce
        AND n.expires_at > (settlements.expiry + ${Number(EXPIRY_SKEW_S)}) * 1000)`)
    .run(nowMs, id);
  return result.changes === 1;
}

/** At start-up: amounts served but not yet deducted on-chain count against their accounts again. */
export function loadReservations(db: Db, reservations: Reservations): number {
  const rows = db.select().from(settlements).where(eq(settlements.state, "pending")).all();
  for (const row of rows) reservations.add(row.commitment, row.nonce, BigInt(row.amount), row.expiry);
  return rows.length;
}
