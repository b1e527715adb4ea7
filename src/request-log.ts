/**
 * The request log: one row per finished chat request in `request_log`, written behind in batches
 * so that no request waits on the database. One prepared statement is reused for every row (a
 * query-builder insert per row costs ~30 µs; a bound prepared statement a few). Rows older than
 * `server.request_log_days` are pruned hourly, in small chunks so the event loop is never held long.
 */
import type { Db } from "./db/client";
import { createWriteBehind, type WriteBehind } from "./db/write-behind";
import type { RequestRecord } from "./deps";

const DAY_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_CHUNK = 5_000;

export interface RequestLogOptions {
  retainDays: number;
  now: () => number;
}

export function createRequestLog(db: Db, options: RequestLogOptions): WriteBehind<RequestRecord> {
  const sqlite = db.$client;
  const insert = sqlite.prepare(
    `INSERT INTO request_log (request_id, created_at, identity, user_id, key_id, model, upstream, status,
       prompt_tokens, completion_tokens, cost_micro, latency_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)`,
  );
  const insertAll = sqlite.transaction((rows: RequestRecord[]) => {
    for (const r of rows) {
      insert.run(r.requestId, r.createdAt, r.identity, r.userId, r.keyId, r.model, r.upstream, r.status,
        r.promptTokens, r.completionTokens, r.costMicro, Math.round(r.latencyMs));
    }
  });
  // Small, frequent batches: a flush holds the event loop for its batch only.
  const queue = createWriteBehind<RequestRecord>((rows) => insertAll(rows), { label: "request log", intervalMs: 100, maxBatch: 256 });
  const pruner = setInterval(() => void pruneRequestLog(db, options.now() - options.retainDays * DAY_MS), PRUNE_EVERY_MS);
  pruner.unref?.();
  return {
    push: queue.push,
    flush: queue.flush,
    close() {
      clearInterval(pruner);
      queue.close();
    },
  };
}

/** Deletes request-log rows created before `before` (ms), a chunk at a time; returns how many. */
export async function pruneRequestLog(db: Db, before: number): Promise<number> {
  const chunk = db.$client.prepare(
    "DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE created_at < ? LIMIT ?)",
  );
  let total = 0;
  for (;;) {
    const { changes } = chunk.run(before, PRUNE_CHUNK);
    total += changes;
    if (changes < PRUNE_CHUNK) return total;
    await Bun.sleep(0); // let requests in between chunks
  }
}
