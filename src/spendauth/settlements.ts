/**
 * The settlement queue: one row per served SpendAuth authorization, (commitment, nonce) unique.
 * Rows move pending -> authorized -> done, or to dead after the attempt limit or once the
 * authorization has expired (the contract refuses expired ones). Plain functions over a db
 * handle, shared by the worker, /api/status and the CLI.
 */
import type { SQL } from "bun";
import { and, asc, count, desc, eq, inArray, lte, not, or, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { postgresOf, tablesOf } from "../db/engine";
import type { settlements } from "../db/schema";
import { authorizationToJson, EXPIRY_SKEW_S, type SpendAuthorization } from "./header";
import type { Reservations } from "./reservations";

export type SettlementState = "pending" | "authorized" | "done" | "dead";
export const SETTLEMENT_STATES: SettlementState[] = ["pending", "authorized", "done", "dead"];
export type SettlementRow = typeof settlements.$inferSelect;

/** One served authorization to record. */
export interface ServedAuthorization {
  auth: SpendAuthorization;
  requestId: string | null;
  at: number;
}

/**
 * Records a served authorization. A second record of the same authorization is ignored. A new
 * authorization for a (commitment, nonce) whose earlier one expired unclaimed (never authorized
 * on-chain, so the nonce is still unused there) replaces it: the earlier one can never be
 * claimed, the new one can; dropping the new one would leave a served request never paid for.
 */
export async function enqueueSettlement(db: Db, auth: SpendAuthorization, requestId: string | null, nowMs: number): Promise<void> {
  const pg = postgresOf(db);
  if (pg) await insertSettlements(pg, [{ auth, requestId, at: nowMs }]);
  else insertSettlement(db, { auth, requestId, at: nowMs });
}

/** The conflict rule of enqueueSettlement, in SQL both engines take. */
const REPLACE_DEAD_UNCLAIMED = `ON CONFLICT (commitment, nonce) DO UPDATE SET amount = excluded.amount, expiry = excluded.expiry,
  "authorization" = excluded."authorization", request_id = excluded.request_id, created_at = excluded.created_at,
  state = 'pending', attempts = 0, next_attempt_at = 0, last_error = NULL, updated_at = excluded.created_at
WHERE settlements.auth_hash IS NULL AND settlements.state IN ('pending', 'dead') AND settlements.expiry < excluded.expiry`;

export function insertSettlement(db: Db, row: ServedAuthorization): void {
  const { auth } = row;
  db.$client
    .query(
      `INSERT INTO settlements (commitment, nonce, amount, expiry, "authorization", request_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ${REPLACE_DEAD_UNCLAIMED}`,
    )
    .run(auth.commitment, auth.nonce.toString(), auth.amount.toString(), Number(auth.expiry), authorizationToJson(auth), row.requestId, row.at);
}

/**
 * One multi-row statement on Postgres. Postgres refuses a statement that updates one row twice,
 * so of several rows for one (commitment, nonce) only the one SQLite's row-by-row inserts would
 * leave is sent: the first, or a later one that replaces it (a later expiry).
 */
export async function insertSettlements(sql: SQL, rows: ServedAuthorization[]): Promise<void> {
  const kept = new Map<string, ServedAuthorization>();
  for (const row of rows) {
    const key = `${row.auth.commitment}:${row.auth.nonce}`;
    const earlier = kept.get(key);
    if (!earlier || earlier.auth.expiry < row.auth.expiry) kept.set(key, row);
  }
  const values = [...kept.values()].map(({ auth, requestId, at }) => ({
    commitment: auth.commitment,
    nonce: auth.nonce.toString(),
    amount: auth.amount.toString(),
    expiry: Number(auth.expiry),
    authorization: authorizationToJson(auth),
    request_id: requestId,
    created_at: at,
  }));
  await sql`INSERT INTO settlements ${sql(values, "commitment", "nonce", "amount", "expiry", "authorization", "request_id", "created_at")} ${sql.unsafe(REPLACE_DEAD_UNCLAIMED)}`;
}

/** SQL: the settlement row `alias` went dead before its spend was authorized on-chain, so its nonce is unused there. */
export function deadUnauthorized(alias: string): string {
  return `${alias}.state = 'dead' AND ${alias}.auth_hash IS NULL`;
}

/** Rows the worker may work on now, oldest nonce of each commitment first. */
export function readySettlements(db: Db, nowMs: number, limit: number): Promise<SettlementRow[]> {
  const { settlements } = tablesOf(db);
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
    .limit(limit);
}

export async function updateSettlement(
  db: Db,
  id: number,
  change: Partial<Pick<SettlementRow, "state" | "attempts" | "nextAttemptAt" | "lastError" | "authHash" | "txHash">>,
  nowMs: number,
): Promise<void> {
  const { settlements } = tablesOf(db);
  await db
    .update(settlements)
    .set({ ...change, updatedAt: nowMs })
    .where(eq(settlements.id, id));
}

export function listSettlements(db: Db, options: { state?: SettlementState; limit?: number } = {}): Promise<SettlementRow[]> {
  const { settlements } = tablesOf(db);
  const query = db.select().from(settlements);
  const filtered = options.state ? query.where(eq(settlements.state, options.state)) : query;
  return filtered.orderBy(desc(settlements.id)).limit(options.limit ?? 100);
}

export async function settlementCounts(db: Db): Promise<Record<SettlementState, number>> {
  const { settlements } = tablesOf(db);
  const counts: Record<SettlementState, number> = { pending: 0, authorized: 0, done: 0, dead: 0 };
  const rows = await db.select({ state: settlements.state, n: count() }).from(settlements).groupBy(settlements.state);
  for (const row of rows) counts[row.state] = Number(row.n);
  return counts;
}

/**
 * Puts a dead settlement back in the queue; false when there is no dead row with this id, or while
 * a newer authorization of its client holds the nonce (a replacement being served: claimed now, the
 * dead one would take the nonce from it, and it would be served for nothing).
 */
export async function retrySettlement(db: Db, id: number, nowMs: number): Promise<boolean> {
  const { settlements } = tablesOf(db);
  const replacementHeld = sql`EXISTS (SELECT 1 FROM spend_nonces n WHERE n.commitment = ${settlements.commitment} AND n.nonce = ${settlements.nonce}
    AND n.expires_at > (${settlements.expiry} + ${Number(EXPIRY_SKEW_S)}) * 1000)`;
  const retried = await db
    .update(settlements)
    .set({
      state: sql`CASE WHEN ${settlements.authHash} IS NULL THEN 'pending' ELSE 'authorized' END`,
      attempts: 0,
      nextAttemptAt: 0,
      updatedAt: nowMs,
    })
    .where(and(eq(settlements.id, id), eq(settlements.state, "dead"), not(replacementHeld)))
    .returning({ id: settlements.id });
  return retried.length === 1;
}

/** At start-up: amounts served but not yet deducted on-chain count against their accounts again. */
export async function loadReservations(db: Db, reservations: Reservations): Promise<number> {
  const { settlements } = tablesOf(db);
  const rows = await db.select().from(settlements).where(eq(settlements.state, "pending"));
  for (const row of rows) reservations.add(row.commitment, row.nonce, BigInt(row.amount), row.expiry);
  return rows.length;
}
