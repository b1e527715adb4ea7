/**
 * The request-log page's query: rows of `request_log` filtered by key, model, endpoint, status
 * class and time, newest first, a page at a time by id (keyset: `before` is the last id shown), so
 * a page costs the same however deep it is. For one user, or everyone (an admin). Only what the
 * log holds: no prompt or answer is ever stored.
 */
import type { Db } from "../db/client";
import { USAGE_ROW_QUERY, type UsageRow } from "../credits/usage-export";

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

export function requestLogPage(db: Db, filter: RequestLogFilter): RequestLogRow[] {
  const where: string[] = [];
  const params: Array<string | number> = [];
  const add = (clause: string, ...values: Array<string | number>): void => {
    where.push(clause);
    params.push(...values);
  };
  if (filter.userId !== undefined) add("r.user_id = ?", filter.userId);
  if (filter.keyId) add("r.key_id = ?", filter.keyId);
  if (filter.model) add("r.model = ?", filter.model);
  if (filter.endpoint) add("r.endpoint = ?", filter.endpoint);
  const statusClass = /^([1-5])xx$/.exec(filter.status ?? "");
  if (statusClass) add("r.status >= ? AND r.status < ?", Number(statusClass[1]) * 100, Number(statusClass[1]) * 100 + 100);
  else if (/^\d{3}$/.test(filter.status ?? "")) add("r.status = ?", Number(filter.status));
  if (filter.from !== undefined) add("r.created_at >= ?", filter.from);
  if (filter.to !== undefined) add("r.created_at < ?", filter.to);
  if (filter.before !== undefined) add("r.id < ?", filter.before);
  return db.$client
    .query<RequestLogRow, Array<string | number>>(
      `${USAGE_ROW_QUERY} ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY r.id DESC LIMIT ${REQUEST_LOG_PAGE + 1}`,
    )
    .all(...params);
}
