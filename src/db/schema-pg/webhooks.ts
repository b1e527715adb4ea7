/** The webhook ingress's durable outbox of jobs. */
import { index, pgTable, text } from "drizzle-orm/pg-core";
import { int, serialId, bytea } from "./columns";

/** call_id comes from the identity column's sequence: never reused, unique across replicas. */
export const webhookJobs = pgTable(
  "webhook_jobs",
  {
    callId: serialId("call_id"),
    jobId: int("job_id").notNull(),
    serviceId: int("service_id").notNull(),
    path: text("path").notNull(),
    name: text("name"),
    body: bytea("body").notNull(),
    contentType: text("content_type"),
    headers: text("headers"),
    dedupeKey: text("dedupe_key").unique(),
    state: text("state", { enum: ["pending", "leased", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: int("attempts").notNull().default(0),
    attemptBase: int("attempt_base").notNull().default(0),
    leaseUntil: int("lease_until"),
    nextAttemptAt: int("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    createdAt: int("created_at").notNull(),
    doneAt: int("done_at"),
  },
  (t) => [index("webhook_jobs_ready").on(t.state, t.nextAttemptAt), index("webhook_jobs_lease").on(t.state, t.leaseUntil)],
);
