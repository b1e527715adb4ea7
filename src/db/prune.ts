/**
 * Age-based pruning of a table with `id` and `created_at` columns (the request log, stored
 * responses): rows created before a time are deleted a chunk at a time, yielding to requests in
 * between, so the event loop is never held long. A schedule prunes soon after start (a server
 * restarted more often than hourly would otherwise never prune), then hourly; a prune the database
 * refuses (locked elsewhere for more than a moment) is logged and put off to the next.
 *
 * Replicas sharing Postgres all run the schedule; a prune there runs under the lease `prune:<table>`
 * (./lease.ts), so one process deletes at a time and the others skip that round. The holder renews
 * between chunks and stops when the lease is lost. On SQLite the one server prunes without one: a
 * lease row written there would wait out the full busy timeout behind a lock held elsewhere,
 * which each chunk's brief wait exists to avoid.
 */
import { inArray, lt } from "drizzle-orm";
import { log } from "../log";
import { brieflyLocked, type Db } from "./client";
import { engineOf, tablesOf } from "./engine";
import { createLease, processHolder } from "./lease";

const DAY_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_FIRST_MS = 5_000;
/** A pruner that died holding the lease lets the next one in after this long. */
const PRUNE_LEASE_MS = 60_000;

/** One lease holder per handle: a handle is a process's connection, so two handles are two replicas. */
const holders = new WeakMap<object, string>();

/**
 * Deletes the rows of `table` created before `before` (ms), `chunkRows` at a time; returns how
 * many (0 when another process holds the prune's lease).
 */
export async function pruneOlderThan(db: Db, table: "request_log" | "stored_responses", before: number, chunkRows: number): Promise<number> {
  const chunk = chunkDeleter(db, table, before, chunkRows);
  if (engineOf(db) === "sqlite") return deleteChunks(chunk, chunkRows, async () => true);
  let holder = holders.get(db.$client);
  if (holder === undefined) holders.set(db.$client, (holder = processHolder()));
  const lease = createLease(db, `prune:${table}`, { holder, ttlMs: PRUNE_LEASE_MS, now: Date.now });
  if (!(await lease.acquire())) return 0;
  let renewedAt = Date.now();
  const stillHeld = async (): Promise<boolean> => {
    if (Date.now() - renewedAt < PRUNE_LEASE_MS / 3) return true;
    renewedAt = Date.now();
    return lease.acquire();
  };
  try {
    return await deleteChunks(chunk, chunkRows, stillHeld);
  } finally {
    // A release the database refuses leaves the lease to expire: the prune itself is done.
    await lease.release().catch(() => undefined);
  }
}

/** Runs `chunk` until one deletes fewer than `chunkRows`, or `mayGoOn` says stop; returns how many in all. */
async function deleteChunks(chunk: () => number | Promise<number>, chunkRows: number, mayGoOn: () => Promise<boolean>): Promise<number> {
  let total = 0;
  for (;;) {
    const deleted = await chunk();
    total += deleted;
    if (deleted < chunkRows || !(await mayGoOn())) return total;
    await Bun.sleep(0); // let requests in between chunks
  }
}

/** One chunk's delete, returning how many rows it took: a prepared statement on SQLite, the query builder on Postgres. */
function chunkDeleter(db: Db, table: "request_log" | "stored_responses", before: number, chunkRows: number): () => number | Promise<number> {
  if (engineOf(db) === "sqlite") {
    const statement = db.$client.prepare<unknown, [number, number]>(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < ? LIMIT ?)`);
    return brieflyLocked(db.$client, () => statement.run(before, chunkRows).changes);
  }
  const t = table === "request_log" ? tablesOf(db).requestLog : tablesOf(db).storedResponses;
  return async () => {
    const oldest = db.select({ id: t.id }).from(t).where(lt(t.createdAt, before)).limit(chunkRows);
    const deleted = await db.delete(t).where(inArray(t.id, oldest)).returning({ id: t.id });
    return deleted.length;
  };
}

export interface PruneSchedule {
  /** Deletes what was created before the time given; returns how many. */
  prune(before: number): Promise<number>;
  retainDays: number;
  now: () => number;
  /** The first prune, this long after start (default 5 s); then hourly. */
  firstPruneMs?: number;
  /** Names the table in the log line of a prune put off. */
  label: string;
}

/** Starts the schedule; returns its stop. */
export function startPruning(schedule: PruneSchedule): () => void {
  const prune = (): void =>
    void schedule
      .prune(schedule.now() - schedule.retainDays * DAY_MS)
      .catch((error: unknown) =>
        log("warn", `${schedule.label}: prune put off, the database refused it`, { error: String((error as Error)?.message ?? error) }),
      );
  const first = setTimeout(prune, schedule.firstPruneMs ?? PRUNE_FIRST_MS);
  const pruner = setInterval(prune, PRUNE_EVERY_MS);
  first.unref?.();
  pruner.unref?.();
  return () => {
    clearTimeout(first);
    clearInterval(pruner);
  };
}
