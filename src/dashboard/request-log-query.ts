/**
 * The request-log page's query: rows of `request_log` filtered by key, model, endpoint, status
 * class and time, newest first, a page at a time by id (keyset: `before` is the last id shown), so
 * a page costs the same however deep it is. For one user, or everyone (an admin). Only what the
 * log holds: no prompt or answer is ever stored.
 */
import { desc, eq, gte, lt, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf } from "../db/engine";
import { selectUsageRows, type UsageRow } from "../credits/usage-export";

export interface RequestLogFilter {
  userId?: number;
  keyId?: string;
  model?: string;
  endpoint?: string;
  /** `2xx`, `4xx`, `5xx`, or an exact status. */
  status?: string;
  from?: number;
  to?: number;
  /** Rows with an id below this one (the next page). */
  before?: number;
}

export type RequestLogRow = UsageRow;

export const REQUEST_LOG_PAGE = 50;

export function requestLogPage(db: Db, filter: RequestLogFilter): Promise<RequestLogRow[]> {
  const { requestLog: r } = tablesOf(db);
  const where: Array<SQL | undefined> = [];
  if (filter.userId !== undefined) where.push(eq(r.userId, filter.userId));
  if (filter.keyId) where.push(eq(r.keyId, filter.keyId));
  if (filter.model) where.push(eq(r.model, filter.model));
  if (filter.endpoint) where.push(eq(r.endpoint, filter.endpoint));
  const statusClass = /^([1-5])xx$/.exec(filter.status ?? "");
  if (statusClass) where.push(gte(r.status, Number(statusClass[1]) * 100), lt(r.status, Number(statusClass[1]) * 100 + 100));
  else if (/^\d{3}$/.test(filter.status ?? "")) where.push(eq(r.status, Number(filter.status)));
  if (filter.from !== undefined) where.push(gte(r.createdAt, filter.from));
  if (filter.to !== undefined) where.push(lt(r.createdAt, filter.to));
  if (filter.before !== undefined) where.push(lt(r.id, filter.before));
  return selectUsageRows(db, where)
    .orderBy(desc(r.id))
    .limit(REQUEST_LOG_PAGE + 1);
}
