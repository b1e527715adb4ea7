/**
 * The request-log page's query: rows of `request_log` filtered by key, model, endpoint, status
 * class and time, newest first, a page at a time by id (keyset: `before` is the last id shown), so
 * a page costs the same however deep it is. For one user, or everyone (an admin). Only what the
 * log holds: no prompt or answer is ever stored.
 */
import type { Db } from "../db/client";

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

export interface RequestLogRow {
  id: number;
  requestId: string;
  createdAt: number;
  email: string | null;
  keyName: string | null;
  keyPrefix: string | null;
  model: string;
  endpoint: string;
  status: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
  latencyMs: number;
}

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
      `SELECT r.id AS id, r.request_id AS requestId, r.created_at AS createdAt, u.email AS email, k.name AS keyName,
              k.display_prefix AS keyPrefix, r.model AS model, r.endpoint AS endpoint, r.status AS status,
              r.prompt_tokens AS promptTokens, r.completion_tokens AS completionTokens, r.cost_micro AS costMicro, r.latency_ms AS latencyMs
         FROM request_log r LEFT JOIN users u ON u.id = r.user_id LEFT JOIN api_keys k ON k.id = r.key_id
        ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY r.id DESC LIMIT ${REQUEST_LOG_PAGE + 1}`,
    )
    .all(...params);
}
