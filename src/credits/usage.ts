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
import { requestLog } from "../db/schema";

export interface UsageTotal {
  model: string;
  requests: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
}

export function recentUsage(db: Db, input: { userId?: number; since: number }): UsageTotal[] {
  const cost = sql<number>`coalesce(sum(${requestLog.costMicro}), 0)`;
  const since = gte(requestLog.createdAt, input.since);
  return db
    .select({
      model: requestLog.model,
      requests: sql<number>`count(*)`,
      promptTokens: sql<number>`coalesce(sum(${requestLog.promptTokens}), 0)`,
      completionTokens: sql<number>`coalesce(sum(${requestLog.completionTokens}), 0)`,
      costMicro: cost,
    })
    .from(requestLog)
    .where(input.userId === undefined ? since : and(eq(requestLog.userId, input.userId), since))
    .groupBy(requestLog.model)
    .orderBy(desc(cost))
    .all();
}
