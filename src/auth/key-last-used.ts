/**
 * `last_used_at`, written behind: touch() records a key's use in memory, at most once a minute per
 * key, and the write-behind queue writes one batch of times per flush (every second). On SQLite, one transaction of prepared updates that waits only briefly for
 * the write lock (brieflyLocked): a failure throws, and the write-behind queue keeps the rows. On
 * Postgres, one multi-row UPDATE whose promise the queue waits on. Either way a refused batch is
 * kept by the queue (keepFailed) and tried again with its backoff, logged when failures start and
 * when writes work again. On Postgres a time never moves back (GREATEST): a batch tried again
 * after a newer one was written cannot undo it.
 */
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf, sqliteOf } from "../db/engine";
import { createWriteBehind, type WriteBehind } from "../db/write-behind";

const LAST_USED_EVERY_MS = 60_000;

interface LastUse {
  id: string;
  at: number;
}

/** Records key use in memory; writes `last_used_at` behind, at most once a minute per key. */
export function createLastUsed(db: Db, now: () => number): { touch(keyId: string): void } & Pick<WriteBehind<unknown>, "flush" | "close"> {
  const written = new Map<string, number>();
  const queue = createWriteBehind<LastUse>(createBatchWriter(db), {
    label: "api key last_used_at",
    intervalMs: 1_000,
    keepFailed: true,
    now,
  });
  return {
    touch(keyId) {
      const t = now();
      const last = written.get(keyId);
      if (last !== undefined && t - last < LAST_USED_EVERY_MS) return;
      written.set(keyId, t);
      queue.push({ id: keyId, at: t });
    },
    flush: queue.flush,
    close: queue.close,
  };
}

function createBatchWriter(db: Db): (rows: LastUse[]) => void | Promise<void> {
  const pg = postgresOf(db);
  if (pg === null) {
    const sqlite = sqliteOf(db, "the last-used batch");
    const update = sqlite.query<unknown, [number, string]>("UPDATE api_keys SET last_used_at = ? WHERE id = ?");
    const writeAll = sqlite.transaction((rows: LastUse[]) => {
      for (const r of rows) update.run(r.at, r.id);
    });
    return brieflyLocked(sqlite, (rows: LastUse[]) => writeAll(rows));
  }
  return async (rows) => {
    const ids = rows.map((r) => r.id);
    const ats = rows.map((r) => r.at);
    await pg`UPDATE api_keys AS k SET last_used_at = GREATEST(COALESCE(k.last_used_at, 0), v.at)
         FROM unnest(${ids}::text[], ${ats}::bigint[]) AS v(id, at) WHERE k.id = v.id`;
  };
}
