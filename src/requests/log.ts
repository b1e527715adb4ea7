/**
 * The request log: one row per finished chat request in `request_log`. Batches come from the
 * request sink (./sink.ts), so no request waits on the database. On SQLite each batch is one
 * transaction of multi-row prepared statements (./db/batch-insert.ts; a query-builder insert costs
 * ~30 µs a row, a bound statement about 2); on Postgres it is one INSERT of the whole batch, sent
 * as one JSON parameter, so the statement text is the same for every batch and stays prepared.
 * Rows older than `server.request_log_days` are pruned as ../db/prune.ts says: 5 s after start and
 * then hourly, in small chunks, by one replica at a time.
 */
import { createBatchInsert, type SqlValue } from "../db/batch-insert";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf } from "../db/engine";
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
  /** Inserts a batch of rows in one transaction (at once on SQLite); throws or rejects, and inserts none, when the database fails. */
  insert(rows: RequestRecord[]): void | Promise<void>;
  close(): void;
}

export function createRequestLog(db: Db, options: RequestLogOptions): RequestLog {
  const stopPruning = startPruning({ ...options, prune: (before) => pruneRequestLog(db, before), label: "request log" });
  return { insert: createInsert(db), close: stopPruning };
}

function createInsert(db: Db): RequestLog["insert"] {
  const pg = postgresOf(db);
  if (pg !== null) {
    return async (rows) => {
      await pg`INSERT INTO request_log (request_id, created_at, identity, user_id, key_id, model, endpoint, upstream, status,
          prompt_tokens, completion_tokens, cost_micro, latency_ms)
        SELECT request_id, created_at, identity, user_id, key_id, model, endpoint, upstream, status,
          prompt_tokens, completion_tokens, cost_micro, latency_ms
        FROM jsonb_populate_recordset(NULL::request_log, ${JSON.stringify(rows.map(columnsOf))}::text::jsonb)`;
    };
  }
  const insertRows = createBatchInsert(db.$client, INSERT, 13, pushValues);
  return brieflyLocked(db.$client, db.$client.transaction(insertRows));
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

/** A row as Postgres' jsonb_populate_recordset reads it: keyed by column. */
function columnsOf(r: RequestRecord): Record<string, SqlValue> {
  return {
    request_id: r.requestId,
    created_at: r.createdAt,
    identity: r.identity,
    user_id: r.userId,
    key_id: r.keyId,
    model: r.model,
    endpoint: r.endpoint,
    upstream: r.upstream,
    status: r.status,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cost_micro: r.costMicro,
    latency_ms: Math.round(r.latencyMs),
  };
}
