/**
 * The triage tables (src/db/schema.ts: triage_alerts, triage_deliveries) as plain synchronous
 * functions over the outbox's bun:sqlite connection; writes run inside Outbox.transact, so they
 * share its group commit and its durability (synchronous = FULL). A delivery row is the durable
 * step of one notify target: it is made in the transaction that stores the summary, and settled
 * (sent, retried later, dead) on its own.
 */
import type { Database } from "bun:sqlite";

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

export type NewAlert = Omit<AlertRow, "id" | "summary" | "summary_error">;

const COLUMNS =
  "id, call_id, job_id, path, kind, status, group_key, dedupe_key, title, severity, details, alert_count, state, summary, summary_error, refers_to, digest_id, created_at, due_at";

export function alertByCall(sqlite: Database, callId: number): AlertRow | null {
  return sqlite.query<AlertRow, [number]>(`SELECT ${COLUMNS} FROM triage_alerts WHERE call_id = ?`).get(callId);
}

export function alertById(sqlite: Database, id: number): AlertRow | null {
  return sqlite.query<AlertRow, [number]>(`SELECT ${COLUMNS} FROM triage_alerts WHERE id = ?`).get(id);
}

/** The latest alert of a group that was not itself a repeat. */
export function lastOfGroup(sqlite: Database, jobId: number, groupKey: string, status?: string): AlertRow | null {
  return sqlite
    .query<AlertRow, [number, string, string | null]>(
      `SELECT ${COLUMNS} FROM triage_alerts WHERE job_id = ? AND group_key = ? AND state != 'duplicate' AND (?3 IS NULL OR status = ?3) ORDER BY id DESC LIMIT 1`,
    )
    .get(jobId, groupKey, status ?? null);
}

/**
 * Alerts (not repeats, not digests) that arrived on `path` since `since`, counted up to `upTo`:
 * the storm check needs no more, and a storm must not make each of its alerts count all the others.
 */
export function countSince(sqlite: Database, jobId: number, path: string, since: number, upTo: number): number {
  return sqlite
    .query<{ n: number }, [string, number, number, number]>(
      "SELECT count(*) AS n FROM (SELECT 1 FROM triage_alerts WHERE path = ? AND created_at >= ? AND job_id = ? AND state NOT IN ('duplicate', 'digest') LIMIT ?)",
    )
    .get(path, since, jobId, upTo)!.n;
}

/** The digest of `path` still collecting at `now`. */
export function openDigest(sqlite: Database, jobId: number, path: string, now: number): AlertRow | null {
  return sqlite
    .query<AlertRow, [number, string, number]>(
      `SELECT ${COLUMNS} FROM triage_alerts WHERE job_id = ? AND path = ? AND state = 'digest' AND due_at > ? ORDER BY id DESC LIMIT 1`,
    )
    .get(jobId, path, now);
}

export function insertAlert(sqlite: Database, row: NewAlert): AlertRow {
  return sqlite
    .query<AlertRow, any[]>(
      `INSERT INTO triage_alerts (call_id, job_id, path, kind, status, group_key, dedupe_key, title, severity, details, alert_count, state, refers_to, digest_id, created_at, due_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING ${COLUMNS}`,
    )
    .get(
      row.call_id,
      row.job_id,
      row.path,
      row.kind,
      row.status,
      row.group_key,
      row.dedupe_key,
      row.title,
      row.severity,
      row.details,
      row.alert_count,
      row.state,
      row.refers_to,
      row.digest_id,
      row.created_at,
      row.due_at,
    )!;
}

export function setSummary(sqlite: Database, id: number, answer: { summary: string } | { error: string }): void {
  if ("summary" in answer) sqlite.run("UPDATE triage_alerts SET state = 'summarised', summary = ?, summary_error = NULL WHERE id = ?", [answer.summary, id]);
  else sqlite.run("UPDATE triage_alerts SET state = 'unsummarised', summary = NULL, summary_error = ? WHERE id = ?", [answer.error, id]);
}

/** One pending delivery per target, due at `dueAt`; a second call for the same alert adds nothing. */
export function addDeliveries(sqlite: Database, alertId: number, kinds: readonly string[], dueAt: number): void {
  const insert = sqlite.prepare("INSERT OR IGNORE INTO triage_deliveries (alert_id, target, kind, next_attempt_at) VALUES (?, ?, ?, ?)");
  kinds.forEach((kind, target) => insert.run(alertId, target, kind, dueAt));
}

export function dueDeliveries(sqlite: Database, now: number, limit: number): DeliveryRow[] {
  return sqlite
    .query<DeliveryRow, [number, number]>(
      "SELECT * FROM triage_deliveries WHERE state = 'pending' AND next_attempt_at <= ? ORDER BY next_attempt_at, alert_id LIMIT ?",
    )
    .all(now, limit);
}

/** When the next pending delivery is due, if any. */
export function nextDue(sqlite: Database): number | null {
  return sqlite.query<{ at: number | null }, []>("SELECT min(next_attempt_at) AS at FROM triage_deliveries WHERE state = 'pending'").get()?.at ?? null;
}

export function deliveriesOf(sqlite: Database, alertId: number): DeliveryRow[] {
  return sqlite.query<DeliveryRow, [number]>("SELECT * FROM triage_deliveries WHERE alert_id = ? ORDER BY target").all(alertId);
}

export function markSent(sqlite: Database, row: Pick<DeliveryRow, "alert_id" | "target">, now: number, remoteId: string | null): void {
  sqlite.run(
    "UPDATE triage_deliveries SET state = 'sent', attempts = attempts + 1, sent_at = ?, remote_id = ?, last_error = NULL WHERE alert_id = ? AND target = ? AND state = 'pending'",
    [now, remoteId, row.alert_id, row.target],
  );
}

/** A failed attempt: pending again at `retryAt`, or dead when `retryAt` is null. */
export function markFailed(sqlite: Database, row: Pick<DeliveryRow, "alert_id" | "target">, error: string, retryAt: number | null): void {
  sqlite.run(
    "UPDATE triage_deliveries SET state = CASE WHEN ?1 IS NULL THEN 'dead' ELSE 'pending' END, attempts = attempts + 1, next_attempt_at = coalesce(?1, next_attempt_at), last_error = ?2 WHERE alert_id = ?3 AND target = ?4 AND state = 'pending'",
    [retryAt, error.slice(0, 2000), row.alert_id, row.target],
  );
}

/** Dead deliveries of an alert made pending again, with a fresh budget of attempts; how many. */
export function retryDeliveries(sqlite: Database, alertId: number, now: number): number {
  return sqlite.run("UPDATE triage_deliveries SET state = 'pending', attempts = 0, next_attempt_at = ? WHERE alert_id = ? AND state = 'dead'", [now, alertId])
    .changes;
}

/** What a digest collected: how many alerts, and the titles seen most. */
export function digestMembers(sqlite: Database, digestId: number): { count: number; titles: Array<{ title: string; n: number }> } {
  const count = sqlite.query<{ n: number }, [number]>("SELECT count(*) AS n FROM triage_alerts WHERE digest_id = ?").get(digestId)!.n;
  const titles = sqlite
    .query<{ title: string; n: number }, [number]>(
      "SELECT title, count(*) AS n FROM triage_alerts WHERE digest_id = ? GROUP BY title ORDER BY n DESC, title LIMIT 10",
    )
    .all(digestId);
  return { count, titles };
}
