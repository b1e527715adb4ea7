/**
 * The triage_deliveries table (src/db/schema/triage.ts): one row per alert and notify target, the durable
 * step of that target's message. It is made in the transaction that stores the summary, and
 * settled (sent, retried later, dead) on its own. A sender takes due rows with a claim that moves
 * their next_attempt_at past the send's longest time (a lease): another process sharing the
 * database skips them meanwhile, and takes them over if this one dies.
 */
import { and, eq, inArray, sql } from "drizzle-orm";
import type { Db } from "../../db/client";
import { postgresOf, tablesOf, type Tables } from "../../db/engine";

export interface DeliveryRow {
  alert_id: number;
  target: number;
  kind: string;
  state: "pending" | "sent" | "dead";
  attempts: number;
  next_attempt_at: number;
  last_error: string | null;
  sent_at: number | null;
  remote_id: string | null;
}

function deliveryColumns({ triageDeliveries: d }: Tables) {
  return {
    alert_id: d.alertId,
    target: d.target,
    kind: d.kind,
    state: d.state,
    attempts: d.attempts,
    next_attempt_at: d.nextAttemptAt,
    last_error: d.lastError,
    sent_at: d.sentAt,
    remote_id: d.remoteId,
  };
}

/** One pending delivery per target, due at `dueAt`; a second call for the same alert adds nothing. */
export async function addDeliveries(db: Db, alertId: number, kinds: readonly string[], dueAt: number): Promise<void> {
  if (kinds.length === 0) return;
  const d = tablesOf(db).triageDeliveries;
  await db
    .insert(d)
    .values(kinds.map((kind, target) => ({ alertId, target, kind, nextAttemptAt: dueAt })))
    .onConflictDoNothing();
}

/**
 * Takes up to `limit` due deliveries, earliest first, and leases them until `now + leaseMs`
 * (their next_attempt_at, which markSent and markFailed settle). On Postgres the rows are picked
 * with SKIP LOCKED, so two replicas claiming at once never take the same one.
 */
export async function claimDeliveries(db: Db, now: number, limit: number, leaseMs: number): Promise<DeliveryRow[]> {
  const t = tablesOf(db);
  const d = t.triageDeliveries;
  const skipLocked = postgresOf(db) ? sql` FOR UPDATE SKIP LOCKED` : sql``;
  const due = sql`SELECT alert_id, target FROM triage_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now} ORDER BY next_attempt_at, alert_id LIMIT ${limit}${skipLocked}`;
  const rows = await db
    .update(d)
    .set({ nextAttemptAt: now + leaseMs })
    .where(sql`(${d.alertId}, ${d.target}) IN (${due})`)
    .returning(deliveryColumns(t));
  return rows.sort((x, y) => x.alert_id - y.alert_id || x.target - y.target);
}

/** When the next pending delivery is due (or a lease on one runs out), if any. */
export async function nextDue(db: Db): Promise<number | null> {
  const d = tablesOf(db).triageDeliveries;
  const [row] = await db
    .select({ at: sql<number | null>`min(${d.nextAttemptAt})`.mapWith((v) => (v === null ? null : Number(v))) })
    .from(d)
    .where(eq(d.state, "pending"));
  return row?.at ?? null;
}

export async function deliveriesOf(db: Db, alertIds: readonly number[]): Promise<DeliveryRow[]> {
  if (alertIds.length === 0) return [];
  const t = tablesOf(db);
  const d = t.triageDeliveries;
  return db
    .select(deliveryColumns(t))
    .from(d)
    .where(inArray(d.alertId, [...alertIds]))
    .orderBy(d.alertId, d.target);
}

export async function markSent(db: Db, row: Pick<DeliveryRow, "alert_id" | "target">, now: number, remoteId: string | null): Promise<void> {
  const d = tablesOf(db).triageDeliveries;
  await db
    .update(d)
    .set({ state: "sent", attempts: sql`${d.attempts} + 1`, sentAt: now, remoteId, lastError: null })
    .where(and(eq(d.alertId, row.alert_id), eq(d.target, row.target), eq(d.state, "pending")));
}

/** A claimed delivery handed back unsent (a stop cut it short): due again at `now`. */
export async function releaseDelivery(db: Db, row: Pick<DeliveryRow, "alert_id" | "target">, now: number): Promise<void> {
  const d = tablesOf(db).triageDeliveries;
  await db
    .update(d)
    .set({ nextAttemptAt: now })
    .where(and(eq(d.alertId, row.alert_id), eq(d.target, row.target), eq(d.state, "pending")));
}

/** A failed attempt: pending again at `retryAt`, or dead when `retryAt` is null. */
export async function markFailed(db: Db, row: Pick<DeliveryRow, "alert_id" | "target">, error: string, retryAt: number | null): Promise<void> {
  const d = tablesOf(db).triageDeliveries;
  const next = retryAt === null ? { state: "dead" as const } : { state: "pending" as const, nextAttemptAt: retryAt };
  await db
    .update(d)
    .set({ ...next, attempts: sql`${d.attempts} + 1`, lastError: error.slice(0, 2000) })
    .where(and(eq(d.alertId, row.alert_id), eq(d.target, row.target), eq(d.state, "pending")));
}

/** Dead deliveries of an alert made pending again, with a fresh budget of attempts; how many. */
export async function retryDeliveries(db: Db, alertId: number, now: number): Promise<number> {
  const d = tablesOf(db).triageDeliveries;
  const rows = await db
    .update(d)
    .set({ state: "pending", attempts: 0, nextAttemptAt: now })
    .where(and(eq(d.alertId, alertId), eq(d.state, "dead")))
    .returning({ target: d.target });
  return rows.length;
}
