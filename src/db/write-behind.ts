/**
 * A write-behind queue: request paths push rows in memory and return; rows are written in one
 * transaction per batch, every `intervalMs` or as soon as `maxBatch` rows wait. close() flushes.
 * flushSoon() is the group commit for rows that must be written before an answer leaves: every
 * caller in one event-loop turn shares one flush at the end of that turn (setImmediate), so a
 * thousand requests finishing together cost one transaction, not a thousand.
 * `accept` sees every row once, in order, at the first flush after its push (counting, logging),
 * however often its write is tried. A batch that fails to write is dropped, or, with `keepFailed`,
 * kept ahead of newer rows (at most `maxKept`; the oldest beyond that are dropped) and tried again
 * after a backoff that doubles from `intervalMs` up to MAX_BACKOFF_MS (../backoff.ts): a database locked elsewhere
 * costs the event loop one short attempt every few seconds, not one per flush. Failures are logged
 * when they start, when rows are dropped and when writes work again, not once per attempt.
 */
import { log } from "../log";
import { backoffDelay } from "../backoff";

export interface WriteBehind<T> {
  push(row: T): void;
  /** Writes what is queued: at once on SQLite; on Postgres the promise ends with the attempt. */
  flush(): void | Promise<void>;
  /** Flushes once at the end of this event-loop turn, shared by every caller in it; resolves after that attempt, written or not. */
  flushSoon(): Promise<void>;
  close(): void | Promise<void>;
  /** Stops the timer and writes what is queued, trying again every RETRY_MS for up to `ms`; returns the rows still unwritten. */
  closeWithin(ms: number): Promise<T[]>;
  /** When writes began failing (the first failed attempt of the current run), or null while they work. */
  failingSince(): number | null;
}

const RETRY_MS = 100;
const MAX_BACKOFF_MS = 2_000;

export interface WriteBehindOptions<T> {
  intervalMs?: number;
  maxBatch?: number;
  /** Keep a batch that failed to write and try it again (rows that must not be lost); default false. */
  keepFailed?: boolean;
  /** With keepFailed, the most rows kept; default unbounded. */
  maxKept?: number;
  /** Sees each pushed row once, in batches, at the first flush after its push. */
  accept?: (rows: T[]) => void;
  label: string;
  now?: () => number;
  /** The backoff's jitter (../backoff.ts); Math.random unless a test fixes it. */
  random?: () => number;
}

export function createWriteBehind<T>(write: (rows: T[]) => void | Promise<void>, options: WriteBehindOptions<T>): WriteBehind<T> {
  const maxBatch = options.maxBatch ?? 500;
  const maxKept = options.maxKept ?? Infinity;
  const intervalMs = options.intervalMs ?? 250;
  const now = options.now ?? Date.now;
  /** Pushed since the last flush. */
  let queue: T[] = [];
  /** Accepted, not yet written: kept after a failed write, oldest first. */
  let pending: T[] = [];
  let failures = 0;
  let firstFailureAt: number | null = null;
  let retryAt = 0;

  const report = (msg: string, error?: unknown): void => {
    const fields = error === undefined ? {} : { error: String(error) };
    log(error === undefined ? "info" : "error", `${options.label}: ${msg}`, fields);
  };
  const take = (): void => {
    const fresh = queue;
    if (fresh.length === 0) return;
    queue = [];
    options.accept?.(fresh);
    pending = pending.length === 0 ? fresh : pending.concat(fresh);
  };
  const written = (): void => {
    if (failures > 0) report(`written again after ${failures} failed attempt(s)`);
    failures = 0;
    firstFailureAt = null;
  };
  const failed = (rows: T[], err: unknown): void => {
    failures += 1;
    firstFailureAt ??= now();
    retryAt = now() + backoffDelay(failures, { firstMs: intervalMs, maxMs: MAX_BACKOFF_MS, random: options.random });
    if (!options.keepFailed) return report(`write failed, ${rows.length} row(s) dropped`, err);
    // Ahead of what was accepted while the write was in flight (none on SQLite).
    const kept = pending.length === 0 ? rows : rows.concat(pending);
    pending = kept.length > maxKept ? kept.slice(kept.length - maxKept) : kept;
    if (failures === 1) report(`write failed, ${rows.length} row(s) kept to retry`, err);
    if (kept.length > pending.length) report(`write still failing, ${kept.length - pending.length} oldest row(s) dropped (at most ${maxKept} are kept)`, err);
  };
  /** The write in flight on Postgres, and the one attempt queued after it: batches never overlap. */
  let inFlight: Promise<void> | null = null;
  let next: Promise<void> | null = null;
  const writePending = (): void | Promise<void> => {
    if (inFlight !== null) {
      next ??= inFlight.then(() => {
        next = null;
        if (now() >= retryAt) return writePending();
      });
      return next;
    }
    if (pending.length === 0) return;
    const rows = pending;
    pending = [];
    let attempt: void | Promise<void>;
    try {
      attempt = write(rows);
    } catch (err) {
      return failed(rows, err);
    }
    if (attempt === undefined) return written();
    inFlight = attempt
      .then(written, (err: unknown) => failed(rows, err))
      .finally(() => {
        inFlight = null;
      });
    return inFlight;
  };
  const flush = (): void | Promise<void> => {
    take();
    if (now() >= retryAt) return writePending();
  };
  let soon: Promise<void> | null = null;
  const flushSoon = (): Promise<void> => {
    soon ??= new Promise<void>((resolve) =>
      setImmediate(() => {
        soon = null;
        let attempt: Promise<void> | undefined;
        try {
          attempt = flush() ?? undefined;
        } finally {
          if (attempt === undefined) resolve();
        }
        attempt?.then(resolve, resolve);
      }),
    );
    return soon;
  };
  const timer = setInterval(() => void flush(), intervalMs);
  timer.unref?.();
  return {
    push(row) {
      // On reaching maxBatch, not past it; a write in backoff waits for its time, not for more rows.
      if (queue.push(row) === maxBatch) queueMicrotask(() => void flush());
    },
    flush,
    flushSoon,
    close() {
      clearInterval(timer);
      take();
      return writePending();
    },
    async closeWithin(ms) {
      clearInterval(timer);
      const deadline = Date.now() + ms;
      take();
      await writePending();
      while (pending.length > 0 && Date.now() < deadline) {
        await Bun.sleep(RETRY_MS);
        take();
        await writePending();
      }
      return pending;
    },
    failingSince: () => firstFailureAt,
  };
}
