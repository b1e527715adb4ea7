/**
 * A write-behind queue: request paths push rows in memory and return; rows are written in one
 * transaction per batch, every `intervalMs` or as soon as `maxBatch` rows wait. close() flushes.
 * A failed batch is logged and dropped rather than stalling requests.
 */
export interface WriteBehind<T> {
  push(row: T): void;
  flush(): void;
  close(): void;
}

export function createWriteBehind<T>(
  write: (rows: T[]) => void,
  options: { intervalMs?: number; maxBatch?: number; label: string },
): WriteBehind<T> {
  const maxBatch = options.maxBatch ?? 500;
  let queue: T[] = [];
  const flush = (): void => {
    if (queue.length === 0) return;
    const rows = queue;
    queue = [];
    try {
      write(rows);
    } catch (err) {
      console.error(JSON.stringify({ level: "error", msg: `${options.label}: write failed, ${rows.length} row(s) dropped`, error: String(err) }));
    }
  };
  const timer = setInterval(flush, options.intervalMs ?? 250);
  timer.unref?.();
  return {
    push(row) {
      queue.push(row);
      if (queue.length >= maxBatch) queueMicrotask(flush);
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}
