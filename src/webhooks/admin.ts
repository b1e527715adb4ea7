/**
 * Inspecting and replaying the outbox: `modelgate jobs list|retry` and the /api/status section.
 * Plain functions over the Drizzle handle of either engine, off the hot path. A retry puts a done or dead call, or
 * one whose lease ran out, back to pending with a fresh attempt budget; a call leased now is
 * refused (its consumer may still run).
 */
import { and, count, desc, eq, inArray, lte, min, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf } from "../db/engine";
import type { JobState } from "./calls";

export const JOB_STATES: readonly JobState[] = ["pending", "leased", "done", "dead"];

export interface JobSummary {
  callId: number;
  jobId: number;
  state: JobState;
  /** Deliveries so far, retries included: the attempt number of the last. */
  attempts: number;
  path: string;
  name: string | null;
  bytes: number;
  createdAt: number;
  leaseUntil: number | null;
  lastError: string | null;
}

export async function listJobs(db: Db, options: { state?: JobState; limit?: number } = {}): Promise<JobSummary[]> {
  const { webhookJobs } = tablesOf(db);
  const where: SQL | undefined = options.state ? eq(webhookJobs.state, options.state) : undefined;
  return db
    .select({
      callId: webhookJobs.callId,
      jobId: webhookJobs.jobId,
      state: webhookJobs.state,
      attempts: webhookJobs.attempts,
      path: webhookJobs.path,
      name: webhookJobs.name,
      // The size, not the body: a list of large calls would otherwise hold every one in memory.
      bytes: sql<number>`length(${webhookJobs.body})`.mapWith(Number),
      createdAt: webhookJobs.createdAt,
      leaseUntil: webhookJobs.leaseUntil,
      lastError: webhookJobs.lastError,
    })
    .from(webhookJobs)
    .where(where)
    .orderBy(desc(webhookJobs.callId))
    .limit(options.limit ?? 100);
}

export type RetryResult = { ok: true; previous: JobState } | { ok: false; reason: "not_found" | "leased" | "pending" };

/**
 * Makes a done or dead call, or one whose lease ran out at `now`, pending again with a fresh
 * attempt budget: its deliveries so far become the base max_attempts counts from. The attempt
 * numbers go on rising, so a consumer that held an earlier one (its lease taken over long ago)
 * cannot ack, fail or extend a later delivery, as it could if a retry restarted them at 1. A call
 * leased now is refused (its consumer may still run), and so is a pending one (it needs none).
 */
export async function retryJob(db: Db, callId: number, now: number): Promise<RetryResult> {
  const { webhookJobs } = tablesOf(db);
  const [row] = await db.select({ state: webhookJobs.state }).from(webhookJobs).where(eq(webhookJobs.callId, callId));
  if (!row) return { ok: false, reason: "not_found" };
  if (row.state === "pending") return { ok: false, reason: "pending" };
  const retriable = or(inArray(webhookJobs.state, ["done", "dead"]), and(eq(webhookJobs.state, "leased"), lte(webhookJobs.leaseUntil, now)));
  const updated = await db
    .update(webhookJobs)
    .set({ state: "pending", attemptBase: sql`${webhookJobs.attempts}`, nextAttemptAt: 0, leaseUntil: null, doneAt: null, lastError: null })
    .where(and(eq(webhookJobs.callId, callId), retriable))
    .returning({ callId: webhookJobs.callId });
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
export async function outboxStats(db: Db, now: number): Promise<OutboxStats> {
  const { webhookJobs } = tablesOf(db);
  const expired = and(eq(webhookJobs.state, "leased"), lte(webhookJobs.leaseUntil, now));
  const state = sql<JobState>`CASE WHEN ${expired} THEN 'pending' ELSE ${webhookJobs.state} END`;
  const counts = await db
    .select({ state, n: count() })
    .from(webhookJobs)
    .where(inArray(webhookJobs.state, ["pending", "leased", "dead"]))
    // By position: on Postgres the CASE's parameters would make the two copies differ.
    .groupBy(sql`1`);
  const by = Object.fromEntries(counts.map((c) => [c.state, c.n])) as Partial<Record<JobState, number>>;
  const [oldest] = await db
    .select({ at: min(webhookJobs.createdAt) })
    .from(webhookJobs)
    .where(or(eq(webhookJobs.state, "pending"), expired));
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
