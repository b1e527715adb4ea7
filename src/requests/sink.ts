/**
 * Where each finished chat request's RequestRecord goes in the server (deps.onRequestDone). The
 * request only appends its record to a queue; every FLUSH_MS, or as soon as FULL_BATCH records wait,
 * the batch is counted into the metrics, written as log lines, and inserted into the request log,
 * in that order. Each of those done for a whole batch in one loop, away from the requests, costs
 * a fraction of doing it as each request ends (measured with `make bench`, see docs/benchmarks.md).
 * Only the insert can fail (a database locked elsewhere): its rows, already counted and logged,
 * are kept and inserted with the next flush, up to MAX_KEPT rows. A metrics scrape flushes the
 * queue first, so /metrics is never behind.
 */
import { createWriteBehind, type WriteBehind } from "../db/write-behind";
import type { RequestRecord } from "./record";

const FLUSH_MS = 100;
/**
 * Large enough to amortise a transaction (each one rewrites the last, partly filled pages of the
 * table and its indexes), small enough that a flush holds the event loop about 3 ms. Under light
 * load the FLUSH_MS timer writes first, with smaller batches.
 */
export const FULL_BATCH = 1024;
/** Rows kept while the database refuses them: about 10 s of a busy server's requests, ~20 MB. */
const MAX_KEPT = 100_000;

export interface RequestSinkParts {
  observe: ((record: RequestRecord) => void) | null;
  logLines: (records: RequestRecord[]) => void;
  insert: (records: RequestRecord[]) => void | Promise<void>;
}

export function createRequestSink(parts: RequestSinkParts): WriteBehind<RequestRecord> {
  const { observe, logLines, insert } = parts;
  return createWriteBehind<RequestRecord>(insert, {
    label: "request log",
    intervalMs: FLUSH_MS,
    maxBatch: FULL_BATCH,
    keepFailed: true,
    maxKept: MAX_KEPT,
    accept: (batch) => {
      if (observe) for (const record of batch) observe(record);
      logLines(batch);
    },
  });
}
