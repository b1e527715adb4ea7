/**
 * The request log: one row per finished chat request in `request_log`. Batches come from the
 * request sink (./sink.ts), so no request waits on the database; each batch is one
 * transaction of multi-row prepared statements (./db/batch-insert.ts; a query-builder insert costs
 * ~30 µs a row, a bound statement about 2). Rows older than `server.request_log_days` are pruned
 * as ../db/prune.ts says: 5 s after start and then hourly, in small chunks.
 */
import { createBatchInsert, type SqlValue } from "../db/batch-insert";
import { brieflyLocked, type Db } from "../db/client";
import { pruneOlderThan, startPruning } from "../db/prune";
import type { RequestRecord } from "./record";

const PRUNE_CHUNK = 5_000;
const INSERT = `INSERT INTO request_log (request_id, created_at, identity, user_id, key_id, model, endpoint, upstream, status,
  prompt_tokens, completion_tokens, cost_micro, latency_ms) VALUES `;

export interface RequestLogOptions {
  retainDays: number;
  now: () => number;
  /** The first prune, this long after start (default 5 s); then hourly. */
  firstPruneMs?: number;
}

export interface RequestLog {
  /** Inserts a batch of rows in one transaction; throws (and inserts none) when the database fails. */
  insert(rows: RequestRecord[]): void;
  close(): void;
}

export function createRequestLog(db: Db, options: RequestLogOptions): RequestLog {
  const insertRows = createBatchInsert(db.$client, INSERT, 13, pushValues);
  const insertAll = brieflyLocked(db.$client, db.$client.transaction(insertRows));
  const stopPruning = startPruning({ ...options, prune: (before) => pruneRequestLog(db, before), label: "request log" });
  return {
    insert: insertAll,
    close: stopPruning,
  };
}

/** Deletes request-log rows created before `before` (ms), a chunk at a time; returns how many. */
export function pruneRequestLog(db: Db, before: number): Promise<number> {
  return pruneOlderThan(db, "request_log", before, PRUNE_CHUNK);
}

function pushValues(values: SqlValue[], r: RequestRecord): void {
  values.push(
    r.requestId,
    r.createdAt,
    r.identity,
    r.userId,
    r.keyId,
    r.model,
    r.endpoint,
    r.upstream,
    r.status,
    r.promptTokens,
    r.completionTokens,
    r.costMicro,
    Math.round(r.latencyMs),
  );
}
