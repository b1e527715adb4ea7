/**
 * Inspecting and replaying the outbox: `modelgate jobs list|retry` and the /api/status section.
 * Plain functions over the Drizzle handle, off the hot path. A retry puts a done or dead call back
 * to pending with a fresh attempt budget; a leased call is refused (its consumer may still run).
 */
import { and, count, desc, eq, inArray, lte, min, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { webhookJobs } from "../db/schema";
import type { JobState } from "./store";

export const JOB_STATES: readonly JobState[] = ["pending", "leased", "done", "dead"];

export interface JobSummary {
  callId: number;
  jobId: number;
  state: JobState;
  attempts: number;
  path: string;
  name: string | null;
  bytes: number;
  createdAt: number;
  leaseUntil: number | null;
  lastError: string | null;
}

export function listJobs(db: Db, options: { state?: JobState; limit?: number } = {}): JobSummary[] {
  const where: SQL | undefined = options.state ? eq(webhookJobs.state, options.state) : undefined;
  const rows = db
    .select({
      callId: webhookJobs.callId,
      jobId: webhookJobs.jobId,
      state: webhookJobs.state,
      attempts: webhookJobs.attempts,
      path: webhookJobs.path,
      name: webhookJobs.name,
      body: webhookJobs.body,
      createdAt: webhookJobs.createdAt,
      leaseUntil: webhookJobs.leaseUntil,
      lastError: webhookJobs.lastError,
    })
    .from(webhookJobs)
    .where(where)
    .orderBy(desc(webhookJobs.callId))
    .limit(options.limit ?? 100)
    .all();
  return rows.map(({ body, ...row }) => ({ ...row, bytes: body.length }));
}

export type RetryResult =
  | { ok: true; previous: JobState }
  | { ok: false; reason: "not_found" | "leased" | "pending" };

/**
 * Makes a call pending again with a fresh attempt budget. A leased call is refused, even once its
 * lease has run out: until another consumer claims it, the holder's attempt number still acks it,
 * and a retry that restarted the count would let that holder ack the next delivery too.
 */
export function retryJob(db: Db, callId: number): RetryResult {
  const row = db.select({ state: webhookJobs.state }).from(webhookJobs).where(eq(webhookJobs.callId, callId)).get();
  if (!row) return { ok: false, reason: "not_found" };
  // A pending call may still hold the attempt numbers of earlier leases: restarting its count would
  // let a consumer whose lease was taken over ack it again. Only finished calls start afresh.
  if (row.state === "leased" || row.state === "pending") return { ok: false, reason: row.state };
  const updated = db
    .update(webhookJobs)
    .set({ state: "pending", attempts: 0, nextAttemptAt: 0, leaseUntil: null, doneAt: null, lastError: null })
    .where(and(eq(webhookJobs.callId, callId), inArray(webhookJobs.state, ["done", "dead"])))
    .returning({ callId: webhookJobs.callId })
    .all();
  if (updated.length !== 1) return { ok: false, reason: "leased" };
  return { ok: true, previous: row.state };
}

export interface OutboxStats {
  pending: number;
  leased: number;
  dead: number;
  /** pending + leased: accepted calls not yet done. */
  outbox_depth: number;
  oldest_pending_age_ms: number | null;
}

/**
 * Counts the undone states only: done rows may be many and are not worth a scan per request. A
 * call whose lease has run out at `now` counts as pending: no consumer holds it any more.
 */
export function outboxStats(db: Db, now: number): OutboxStats {
  const expired = and(eq(webhookJobs.state, "leased"), lte(webhookJobs.leaseUntil, now));
  const state = sql<JobState>`CASE WHEN ${expired} THEN 'pending' ELSE ${webhookJobs.state} END`;
  const counts = db
    .select({ state, n: count() })
    .from(webhookJobs)
    .where(inArray(webhookJobs.state, ["pending", "leased", "dead"]))
    .groupBy(state)
    .all();
  const by = Object.fromEntries(counts.map((c) => [c.state, c.n])) as Partial<Record<JobState, number>>;
  const oldest = db
    .select({ at: min(webhookJobs.createdAt) })
    .from(webhookJobs)
    .where(or(eq(webhookJobs.state, "pending"), expired))
    .get();
  const pending = by.pending ?? 0;
  const leased = by.leased ?? 0;
  return {
    pending,
    leased,
    dead: by.dead ?? 0,
    outbox_depth: pending + leased,
    oldest_pending_age_ms: oldest?.at == null ? null : Math.max(0, now - oldest.at),
  };
}
