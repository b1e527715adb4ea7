/**
 * The triage_alerts table (src/db/schema/triage.ts) as plain functions over a database handle of either
 * engine; the handler's writes run in one transaction each (../../db/engine.ts transact) on the
 * outbox's handle, together with the call's ack. Each alert's deliveries are in
 * ./delivery-rows.ts.
 */
import { and, count, desc, eq, gt, gte, inArray, ne, notInArray, sql } from "drizzle-orm";
import type { Db } from "../../db/client";
import { tablesOf, type Tables } from "../../db/engine";

type AlertState = "triaging" | "summarised" | "unsummarised" | "duplicate" | "held" | "digest";

export interface AlertRow {
  id: number;
  call_id: number | null;
  job_id: number;
  path: string;
  kind: string;
  status: string;
  group_key: string | null;
  dedupe_key: string | null;
  title: string;
  severity: string | null;
  details: string;
  alert_count: number;
  state: AlertState;
  summary: string | null;
  summary_error: string | null;
  refers_to: number | null;
  digest_id: number | null;
  created_at: number;
  due_at: number | null;
}

export type NewAlert = Omit<AlertRow, "id" | "summary" | "summary_error">;

function alertColumns({ triageAlerts: a }: Tables) {
  return {
    id: a.id,
    call_id: a.callId,
    job_id: a.jobId,
    path: a.path,
    kind: a.kind,
    status: a.status,
    group_key: a.groupKey,
    dedupe_key: a.dedupeKey,
    title: a.title,
    severity: a.severity,
    details: a.details,
    alert_count: a.alertCount,
    state: sql<AlertState>`${a.state}`,
    summary: a.summary,
    summary_error: a.summaryError,
    refers_to: a.refersTo,
    digest_id: a.digestId,
    created_at: a.createdAt,
    due_at: a.dueAt,
  };
}

export async function alertByCall(db: Db, callId: number): Promise<AlertRow | null> {
  const t = tablesOf(db);
  const [row] = await db.select(alertColumns(t)).from(t.triageAlerts).where(eq(t.triageAlerts.callId, callId)).limit(1);
  return row ?? null;
}

export async function alertById(db: Db, id: number): Promise<AlertRow | null> {
  const t = tablesOf(db);
  const [row] = await db.select(alertColumns(t)).from(t.triageAlerts).where(eq(t.triageAlerts.id, id)).limit(1);
  return row ?? null;
}

/** The latest alert of a group that was not itself a repeat. */
export async function lastOfGroup(db: Db, jobId: number, groupKey: string, status?: string): Promise<AlertRow | null> {
  const t = tablesOf(db);
  const a = t.triageAlerts;
  const where = and(eq(a.jobId, jobId), eq(a.groupKey, groupKey), ne(a.state, "duplicate"), status === undefined ? undefined : eq(a.status, status));
  const [row] = await db.select(alertColumns(t)).from(a).where(where).orderBy(desc(a.id)).limit(1);
  return row ?? null;
}

/**
 * Alerts (not repeats, not digests) that arrived on `path` since `since`, counted up to `upTo`:
 * the storm check needs no more, and a storm must not make each of its alerts count all the others.
 */
export async function countSince(db: Db, jobId: number, path: string, since: number, upTo: number): Promise<number> {
  const a = tablesOf(db).triageAlerts;
  const recent = db
    .select({ one: sql`1` })
    .from(a)
    .where(and(eq(a.path, path), gte(a.createdAt, since), eq(a.jobId, jobId), notInArray(a.state, ["duplicate", "digest"])))
    .limit(upTo)
    .as("recent");
  const [row] = await db.select({ n: count() }).from(recent);
  return row.n;
}

/** The digest of `path` still collecting at `now`. */
export async function openDigest(db: Db, jobId: number, path: string, now: number): Promise<AlertRow | null> {
  const t = tablesOf(db);
  const a = t.triageAlerts;
  const where = and(eq(a.jobId, jobId), eq(a.path, path), eq(a.state, "digest"), gt(a.dueAt, now));
  const [row] = await db.select(alertColumns(t)).from(a).where(where).orderBy(desc(a.id)).limit(1);
  return row ?? null;
}

export async function insertAlert(db: Db, row: NewAlert): Promise<AlertRow> {
  const t = tablesOf(db);
  const [inserted] = await db
    .insert(t.triageAlerts)
    .values({
      callId: row.call_id,
      jobId: row.job_id,
      path: row.path,
      kind: row.kind,
      status: row.status,
      groupKey: row.group_key,
      dedupeKey: row.dedupe_key,
      title: row.title,
      severity: row.severity,
      details: row.details,
      alertCount: row.alert_count,
      state: row.state,
      refersTo: row.refers_to,
      digestId: row.digest_id,
      createdAt: row.created_at,
      dueAt: row.due_at,
    })
    .returning(alertColumns(t));
  return inserted;
}

export async function setSummary(db: Db, id: number, answer: { summary: string } | { error: string }): Promise<void> {
  const a = tablesOf(db).triageAlerts;
  const set =
    "summary" in answer
      ? { state: "summarised", summary: answer.summary, summaryError: null }
      : { state: "unsummarised", summary: null, summaryError: answer.error };
  await db.update(a).set(set).where(eq(a.id, id));
}

/** What a digest collected: how many alerts, and the titles seen most. */
export async function digestMembers(db: Db, digestId: number): Promise<{ count: number; titles: Array<{ title: string; n: number }> }> {
  const a = tablesOf(db).triageAlerts;
  const [total] = await db.select({ n: count() }).from(a).where(eq(a.digestId, digestId));
  const titles = await db
    .select({ title: a.title, n: count() })
    .from(a)
    .where(eq(a.digestId, digestId))
    .groupBy(a.title)
    .orderBy(desc(count()), a.title)
    .limit(10);
  return { count: total.n, titles };
}

/** The newest alerts but held ones (a digest stands for them), and how many each digest holds. */
export async function recentAlerts(db: Db, limit: number): Promise<{ alerts: AlertRow[]; held: Map<number, number> }> {
  const t = tablesOf(db);
  const a = t.triageAlerts;
  const alerts = await db.select(alertColumns(t)).from(a).where(ne(a.state, "held")).orderBy(desc(a.id)).limit(limit);
  const digests = alerts.filter((row) => row.state === "digest").map((row) => row.id);
  const counts =
    digests.length === 0 ? [] : await db.select({ digestId: a.digestId, n: count() }).from(a).where(inArray(a.digestId, digests)).groupBy(a.digestId);
  return { alerts, held: new Map(counts.map((c) => [c.digestId!, c.n])) };
}
