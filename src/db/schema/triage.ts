/** Alert triage: the alerts read and each notify target's delivery. */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * One row per alert a `triage` job read (and one per storm digest, with no call): what it was,
 * what became of it (`state`), and the model's summary or why there is none. The summary is kept
 * before any delivery is made, so a redelivered call never asks the model twice. Written by
 * src/webhooks/triage/.
 */
export const triageAlerts = sqliteTable(
  "triage_alerts",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** The webhook call it was read from; null for a digest. */
    callId: integer("call_id").unique(),
    jobId: integer("job_id").notNull(),
    path: text("path").notNull(),
    kind: text("kind").notNull(),
    status: text("status").notNull(),
    groupKey: text("group_key"),
    dedupeKey: text("dedupe_key"),
    title: text("title").notNull(),
    severity: text("severity"),
    /** One line per alert of the group, for the message when there is no summary. */
    details: text("details").notNull().default(""),
    alertCount: integer("alert_count").notNull().default(0),
    /** triaging (the model not yet asked or answered), summarised, unsummarised, duplicate, held (in a digest), digest. */
    state: text("state").notNull(),
    summary: text("summary"),
    summaryError: text("summary_error"),
    /** A resolved group's firing row. */
    refersTo: integer("refers_to"),
    /** A held alert's digest row. */
    digestId: integer("digest_id"),
    createdAt: integer("created_at").notNull(),
    /** A digest: when it closes and is sent. */
    dueAt: integer("due_at"),
  },
  (t) => [index("triage_alerts_group").on(t.jobId, t.groupKey, t.id), index("triage_alerts_path_time").on(t.path, t.createdAt)],
);

/** One row per alert and notify target: that target's delivery, retried and dead-lettered on its own. */
export const triageDeliveries = sqliteTable(
  "triage_deliveries",
  {
    alertId: integer("alert_id").notNull(),
    /** The target's place in the job's `notify` list. */
    target: integer("target").notNull(),
    kind: text("kind").notNull(),
    state: text("state", { enum: ["pending", "sent", "dead"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at").notNull(),
    lastError: text("last_error"),
    sentAt: integer("sent_at"),
    /** What the service called the message (a Matrix event id), for a later reply to it. */
    remoteId: text("remote_id"),
  },
  (t) => [primaryKey({ columns: [t.alertId, t.target] }), index("triage_deliveries_due").on(t.state, t.nextAttemptAt)],
);
