/**
 * The usage export: one row per logged request (`request_log`, joined with its user and key), for
 * `modelgate usage export` and the dashboard's "Download CSV". Rows come from a SQLite cursor a
 * row at a time and leave as text a chunk at a time, so an export of millions of rows holds one
 * chunk in memory, never the whole result. Prompts and answers are never logged, so never here.
 * Text a spreadsheet would run as a formula (a key named `=HYPERLINK(...)`) is written with a
 * leading `'`.
 *
 *   usageChunks(db, filter, format) -> iterator of text chunks (a CSV header first, or a JSON array)
 */
import type { Db } from "../db/client";
import { formatCredits } from "./amount";

export interface UsageFilter {
  userId?: number;
  keyId?: string;
  /** Inclusive, epoch ms. */
  from?: number;
  /** Exclusive, epoch ms. */
  to?: number;
}

export type UsageFormat = "csv" | "json";

const USAGE_COLUMNS = [
  "time",
  "user",
  "key_name",
  "key_prefix",
  "model",
  "endpoint",
  "status",
  "tokens_in",
  "tokens_out",
  "credits",
  "latency_ms",
  "request_id",
] as const;

/** A logged request as the usage export and the dashboard's request log read it: its row, user and key. */
export interface UsageRow {
  id: number;
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
  requestId: string;
}

/** The SELECT and joins that read a UsageRow; the caller adds WHERE and ORDER BY on `r`. */
export const USAGE_ROW_QUERY = `SELECT r.id AS id, r.created_at AS createdAt, u.email AS email, k.name AS keyName,
       k.display_prefix AS keyPrefix, r.model AS model, r.endpoint AS endpoint, r.status AS status,
       r.prompt_tokens AS promptTokens, r.completion_tokens AS completionTokens, r.cost_micro AS costMicro,
       r.latency_ms AS latencyMs, r.request_id AS requestId
  FROM request_log r LEFT JOIN users u ON u.id = r.user_id LEFT JOIN api_keys k ON k.id = r.key_id`;

/** Rows a chunk holds before it is handed on. */
const CHUNK_ROWS = 500;

export function* usageChunks(db: Db, filter: UsageFilter, format: UsageFormat): Generator<string> {
  const where: string[] = [];
  const params: Array<string | number> = [];
  const add = (clause: string, value: string | number | undefined): void => {
    if (value === undefined) return;
    where.push(clause);
    params.push(value);
  };
  add("r.user_id = ?", filter.userId);
  add("r.key_id = ?", filter.keyId);
  add("r.created_at >= ?", filter.from);
  add("r.created_at < ?", filter.to);
  const query = db.$client.query<UsageRow, Array<string | number>>(
    `${USAGE_ROW_QUERY} ${where.length === 0 ? "" : `WHERE ${where.join(" AND ")}`} ORDER BY r.created_at, r.id`,
  );
  let chunk = format === "csv" ? `${USAGE_COLUMNS.join(",")}\r\n` : "[";
  let rows = 0;
  for (const row of query.iterate(...params)) {
    const values = [
      new Date(row.createdAt).toISOString(),
      row.email ?? "",
      row.keyName ?? "",
      row.keyPrefix ?? "",
      row.model,
      row.endpoint,
      row.status,
      row.promptTokens,
      row.completionTokens,
      formatCredits(row.costMicro),
      row.latencyMs,
      row.requestId,
    ] as const;
    if (format === "csv") chunk += `${values.map(csvField).join(",")}\r\n`;
    else chunk += `${rows === 0 ? "\n" : ",\n"}${JSON.stringify(Object.fromEntries(USAGE_COLUMNS.map((c, i) => [c, values[i]])))}`;
    rows += 1;
    if (rows % CHUNK_ROWS === 0) {
      yield chunk;
      chunk = "";
    }
  }
  if (format === "json") chunk += rows === 0 ? "]\n" : "\n]\n";
  yield chunk;
}

function csvField(value: string | number): string {
  if (typeof value === "number") return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
