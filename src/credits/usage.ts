/**
 * Recent usage from `request_log` (written behind by the request log, so the last ~250 ms may be
 * missing): per-model totals since a time, for one user or everyone. Read-only; uses the
 * (user_id, created_at) index when a user is given. The dashboard's per-day chart has its own
 * query (src/dashboard/usage-query.ts).
 *
 *   recentUsage(db, { userId?, since }) -> UsageTotal[] (most expensive model first)
 */
import { and, desc, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf } from "../db/engine";

export interface UsageTotal {
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
}

/** Sums are numbers on both engines (Postgres gives a bigint's sum and count as text). */
export function recentUsage(db: Db, input: { userId?: number; since: number }): Promise<UsageTotal[]> {
  const { requestLog } = tablesOf(db);
  const cost = sql<number>`coalesce(sum(${requestLog.costMicro}), 0)`.mapWith(Number);
  const since = gte(requestLog.createdAt, input.since);
  return db
    .select({
      model: requestLog.model,
      requests: sql<number>`count(*)`.mapWith(Number),
      promptTokens: sql<number>`coalesce(sum(${requestLog.promptTokens}), 0)`.mapWith(Number),
      completionTokens: sql<number>`coalesce(sum(${requestLog.completionTokens}), 0)`.mapWith(Number),
      costMicro: cost,
    })
    .from(requestLog)
    .where(input.userId === undefined ? since : and(eq(requestLog.userId, input.userId), since))
    .groupBy(requestLog.model)
    .orderBy(desc(cost));
}
