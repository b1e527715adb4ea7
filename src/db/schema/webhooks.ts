/** The webhook ingress's durable outbox of jobs. */
import { blob, index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The webhook outbox: one row per accepted JobCall; call_id is the row id (AUTOINCREMENT, so it
 * is never reused, even after done rows are pruned). The body is the request's raw bytes.
 * A row is `leased` to one consumer until lease_until; `attempts` counts deliveries, across
 * retries too, and fences late acks from a consumer whose lease was taken over; `attempt_base` is
 * what it was at the last `jobs retry` (max_attempts bounds the deliveries since). Written by
 * src/webhooks/.
 */
export const webhookJobs = sqliteTable(
  "webhook_jobs",
  {
    callId: integer("call_id").primaryKey({ autoIncrement: true }),
    jobId: integer("job_id").notNull(),
    serviceId: integer("service_id").notNull(),
    path: text("path").notNull(),
    name: text("name"),
    body: blob("body", { mode: "buffer" }).notNull(),
    contentType: text("content_type"),
    /** The request headers a handler may need (src/webhooks/headers.ts: a fixed allowlist, bounded), as a JSON object; null when none was sent. */
    headers: text("headers"),
    /** `path NUL delivery-id` while inside the dedupe window; cleared when a later delivery reuses it. */
    dedupeKey: text("dedupe_key").unique(),
    state: text("state", { enum: ["pending", "leased", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    attemptBase: integer("attempt_base").notNull().default(0),
    leaseUntil: integer("lease_until"),
    nextAttemptAt: integer("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    createdAt: integer("created_at").notNull(),
    doneAt: integer("done_at"),
  },
  (t) => [index("webhook_jobs_ready").on(t.state, t.nextAttemptAt), index("webhook_jobs_lease").on(t.state, t.leaseUntil)],
);
