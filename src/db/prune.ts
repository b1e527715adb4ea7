/**
 * Age-based pruning of a table with `id` and `created_at` columns (the request log, stored
 * responses): rows created before a time are deleted a chunk at a time, yielding to requests in
 * between, so the event loop is never held long. A schedule prunes soon after start (a server
 * restarted more often than hourly would otherwise never prune), then hourly; a prune the database
 * refuses (locked elsewhere for more than a moment) is logged and put off to the next.
 */
import { log } from "../log";
import { brieflyLocked, type Db } from "./client";

const DAY_MS = 86_400_000;
const PRUNE_EVERY_MS = 3_600_000;
const PRUNE_FIRST_MS = 5_000;

/** Deletes the rows of `table` created before `before` (ms), `chunkRows` at a time; returns how many. */
export async function pruneOlderThan(db: Db, table: "request_log" | "stored_responses", before: number, chunkRows: number): Promise<number> {
  const statement = db.$client.prepare<unknown, [number, number]>(`DELETE FROM ${table} WHERE id IN (SELECT id FROM ${table} WHERE created_at < ? LIMIT ?)`);
  const chunk = brieflyLocked(db.$client, () => statement.run(before, chunkRows));
  let total = 0;
  for (;;) {
    const { changes } = chunk();
    total += changes;
    if (changes < chunkRows) return total;
    await Bun.sleep(0); // let requests in between chunks
  }
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
