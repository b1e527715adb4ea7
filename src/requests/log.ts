/**
 * The request log: one row per finished chat request in `request_log`. Batches come from the
 * request sink (./sink.ts), so no request waits on the database; each batch is one
 * transaction of multi-row prepared statements (./db/batch-insert.ts; a query-builder insert costs
 * ~30 µs a row, a bound statement about 2). Rows older than `server.request_log_days` are pruned
 * 5 s after start and then hourly, in small chunks so the event loop is never held long; a prune
 * the database refuses (locked elsewhere) is logged and put off to the next.
 */
import { createBatchInsert, type SqlValue } from "../db/batch-insert";
import { brieflyLocked, type Db } from "../db/client";
import type { RequestRecord } from "../deps";
import { log } from "../log";

const DAY_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_FIRST_MS = 5_000;
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
  // A prune the database refuses (locked elsewhere for more than a moment) waits for the next one.
  const prune = (): void =>
    void pruneRequestLog(db, options.now() - options.retainDays * DAY_MS).catch((error: unknown) =>
      log("warn", "request log: prune put off, the database refused it", { error: String((error as Error)?.message ?? error) }),
    );
  // Once soon after start too: a server restarted more often than hourly would otherwise never prune.
  const first = setTimeout(prune, options.firstPruneMs ?? PRUNE_FIRST_MS);
  const pruner = setInterval(prune, PRUNE_EVERY_MS);
  first.unref?.();
  pruner.unref?.();
  return {
    insert: insertAll,
    close: () => {
      clearTimeout(first);
      clearInterval(pruner);
    },
  };
}

/** Deletes request-log rows created before `before` (ms), a chunk at a time; returns how many. */
export async function pruneRequestLog(db: Db, before: number): Promise<number> {
  const statement = db.$client.prepare<unknown, [number, number]>(
    "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE created_at < ? LIMIT ?)",
  );
  const chunk = brieflyLocked(db.$client, () => statement.run(before, PRUNE_CHUNK));
  let total = 0;
  for (;;) {
    const { changes } = chunk();
    total += changes;
    if (changes < PRUNE_CHUNK) return total;
    await Bun.sleep(0); // let requests in between chunks
  }
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
