/** Alert triage: the alerts read and each notify target's delivery. */
import { index, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { int, serialId } from "./columns";

export const triageAlerts = pgTable(
  "triage_alerts",
  {
    id: serialId("id"),
    callId: int("call_id").unique(),
    jobId: int("job_id").notNull(),
    path: text("path").notNull(),
    kind: text("kind").notNull(),
    status: text("status").notNull(),
    groupKey: text("group_key"),
    dedupeKey: text("dedupe_key"),
    title: text("title").notNull(),
    severity: text("severity"),
    details: text("details").notNull().default(""),
    alertCount: int("alert_count").notNull().default(0),
    state: text("state").notNull(),
    summary: text("summary"),
    summaryError: text("summary_error"),
    refersTo: int("refers_to"),
    digestId: int("digest_id"),
    createdAt: int("created_at").notNull(),
    dueAt: int("due_at"),
  },
  (t) => [index("triage_alerts_group").on(t.jobId, t.groupKey, t.id), index("triage_alerts_path_time").on(t.path, t.createdAt)],
);

export const triageDeliveries = pgTable(
  "triage_deliveries",
  {
    alertId: int("alert_id").notNull(),
    target: int("target").notNull(),
    kind: text("kind").notNull(),
    state: text("state", { enum: ["pending", "sent", "dead"] })
      .notNull()
      .default("pending"),
    attempts: int("attempts").notNull().default(0),
    nextAttemptAt: int("next_attempt_at").notNull(),
    lastError: text("last_error"),
    sentAt: int("sent_at"),
    remoteId: text("remote_id"),
  },
  (t) => [primaryKey({ columns: [t.alertId, t.target] }), index("triage_deliveries_due").on(t.state, t.nextAttemptAt)],
);
