/**
 * The usage export: one row per logged request (`request_log`, joined with its user and key), for
 * `modelgate usage export` and the dashboard's "Download CSV". Rows are read CHUNK_ROWS at a time
 * in (created_at, id) order, each chunk after the last one's final row (keyset: every chunk costs
 * an index seek, however deep), and leave as text a chunk at a time, so an export of millions of
 * rows holds one chunk in memory, never the whole result. The same on both engines. Prompts and
 * answers are never logged, so never here. Text a spreadsheet would run as a formula (a key named
 * `=HYPERLINK(...)`) is written with a leading `'`.
 *
 *   usageChunks(db, filter, format) -> async iterator of text chunks (a CSV header first, or a JSON array)
 */
import { and, asc, eq, gte, lt, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/client";
import { tablesOf } from "../db/engine";
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

/**
 * A select of UsageRow from `request_log` joined with its user and key, where all of `where` holds
 * (undefined ones left out), ordered and limited by the caller.
 */
export function selectUsageRows(db: Db, where: Array<SQL | undefined>) {
  const { apiKeys, requestLog: r, users } = tablesOf(db);
  return db
    .select({
      id: r.id,
      createdAt: r.createdAt,
      email: users.email,
      keyName: apiKeys.name,
      keyPrefix: apiKeys.displayPrefix,
      model: r.model,
      endpoint: r.endpoint,
      status: r.status,
      promptTokens: r.promptTokens,
      completionTokens: r.completionTokens,
      costMicro: r.costMicro,
      latencyMs: r.latencyMs,
      requestId: r.requestId,
    })
    .from(r)
    .leftJoin(users, eq(users.id, r.userId))
    .leftJoin(apiKeys, eq(apiKeys.id, r.keyId))
    .where(and(...where))
    .$dynamic();
}

/** Rows a chunk holds before it is handed on. */
const CHUNK_ROWS = 500;

export async function* usageChunks(db: Db, filter: UsageFilter, format: UsageFormat): AsyncGenerator<string> {
  const { requestLog: r } = tablesOf(db);
  const chunkAfter = (last: UsageRow | null): Promise<UsageRow[]> =>
    selectUsageRows(db, [
      filter.userId === undefined ? undefined : eq(r.userId, filter.userId),
      filter.keyId === undefined ? undefined : eq(r.keyId, filter.keyId),
      filter.from === undefined ? undefined : gte(r.createdAt, filter.from),
      filter.to === undefined ? undefined : lt(r.createdAt, filter.to),
      last === null ? undefined : sql`(${r.createdAt}, ${r.id}) > (${last.createdAt}, ${last.id})`,
    ])
      .orderBy(asc(r.createdAt), asc(r.id))
      .limit(CHUNK_ROWS);
  let chunk = format === "csv" ? `${USAGE_COLUMNS.join(",")}\r\n` : "[";
  let rows = 0;
  let last: UsageRow | null = null;
  for (;;) {
    const read = await chunkAfter(last);
    for (const row of read) {
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
    }
    if (read.length < CHUNK_ROWS) break;
    last = read[read.length - 1];
    yield chunk;
    chunk = "";
  }
  if (format === "json") chunk += rows === 0 ? "]\n" : "\n]\n";
  yield chunk;
}

function csvField(value: string | number): string {
  if (typeof value === "number") return String(value);
  const text = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
