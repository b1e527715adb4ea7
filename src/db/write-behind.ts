/**
 * A write-behind queue: request paths push rows in memory and return; rows are written in one
 * transaction per batch, every `intervalMs` or as soon as `maxBatch` rows wait. close() flushes.
 * A batch that fails to write is logged, then dropped rather than stalling requests, or, with
 * `keepFailed`, kept at the head of the queue and written again with the next flush.
 */
export interface WriteBehind<T> {
  push(row: T): void;
  flush(): void;
  close(): void;
  /** Stops the timer and writes what is queued, trying again every RETRY_MS for up to `ms`; returns the rows still unwritten. */
  closeWithin(ms: number): Promise<T[]>;
}

const RETRY_MS = 100;

export interface WriteBehindOptions {
  intervalMs?: number;
  maxBatch?: number;
  /** Keep a batch that failed to write and try it again (rows that must not be lost); default false. */
  keepFailed?: boolean;
  label: string;
}

export function createWriteBehind<T>(write: (rows: T[]) => void, options: WriteBehindOptions): WriteBehind<T> {
  const maxBatch = options.maxBatch ?? 500;
  let queue: T[] = [];
  const flush = (): void => {
    if (queue.length === 0) return;
    const rows = queue;
    queue = [];
    try {
      write(rows);
    } catch (err) {
      if (options.keepFailed) queue = rows.concat(queue);
      const fate = options.keepFailed ? "kept to retry" : "dropped";
      console.error(JSON.stringify({ level: "error", msg: `${options.label}: write failed, ${rows.length} row(s) ${fate}`, error: String(err) }));
    }
  };
  const timer = setInterval(flush, options.intervalMs ?? 250);
  timer.unref?.();
  return {
    push(row) {
      // On reaching maxBatch, not past it: kept failed rows wait for the timer, not one retry per push.
      if (queue.push(row) === maxBatch) queueMicrotask(flush);
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
    async closeWithin(ms) {
      clearInterval(timer);
      const deadline = Date.now() + ms;
      flush();
      while (queue.length > 0 && Date.now() < deadline) {
        await Bun.sleep(RETRY_MS);
        flush();
      }
      return queue;
    },
  };
}
