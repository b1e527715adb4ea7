/**
 * Read-only queries over `request_log` for the Credits & usage page: per-day, per-model totals
 * for a window (requests, tokens, credits spent) and the most recent requests. Days are UTC.
 * Both use the (user_id, created_at) index; nothing here writes.
 */
import { and, desc, eq, gte, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf } from "../db/engine";

export interface DailyUsageRow {
  /** YYYY-MM-DD (UTC). */
  day: string;
  model: string;
  requests: number;
  tokens: number;
  costMicro: number;
}

export interface RecentRequest {
  requestId: string;
  createdAt: number;
  model: string;
  identity: string;
  keyId: string | null;
  /** The key's name when the request used an API key. */
  keyName: string | null;
  status: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
  latencyMs: number;
}

export async function dailyUsage(db: Db, options: { userId: number; since: number }): Promise<DailyUsageRow[]> {
  const { requestLog } = tablesOf(db);
  const day = sql<number>`${requestLog.createdAt} / 86400000`;
  const rows = await db
    .select({
      day,
      model: requestLog.model,
      requests: sql<number>`count(*)`,
      tokens: sql<number>`coalesce(sum(${requestLog.promptTokens} + ${requestLog.completionTokens}), 0)`,
      costMicro: sql<number>`coalesce(sum(${requestLog.costMicro}), 0)`,
    })
    .from(requestLog)
    .where(and(eq(requestLog.userId, options.userId), gte(requestLog.createdAt, options.since)))
    .groupBy(day, requestLog.model);
  return rows.map((r) => ({
    day: new Date(Number(r.day) * 86_400_000).toISOString().slice(0, 10),
    model: r.model,
    requests: Number(r.requests),
    tokens: Number(r.tokens),
    costMicro: Number(r.costMicro),
  }));
}

export function recentRequests(db: Db, options: { userId: number; limit: number }): Promise<RecentRequest[]> {
  const { apiKeys, requestLog } = tablesOf(db);
  return db
    .select({
      requestId: requestLog.requestId,
      createdAt: requestLog.createdAt,
      model: requestLog.model,
      identity: requestLog.identity,
      keyId: requestLog.keyId,
      keyName: apiKeys.name,
      status: requestLog.status,
      promptTokens: requestLog.promptTokens,
      completionTokens: requestLog.completionTokens,
      costMicro: requestLog.costMicro,
      latencyMs: requestLog.latencyMs,
    })
    .from(requestLog)
    .leftJoin(apiKeys, eq(apiKeys.id, requestLog.keyId))
    .where(eq(requestLog.userId, options.userId))
    .orderBy(desc(requestLog.createdAt), desc(requestLog.id))
    .limit(options.limit);
}
