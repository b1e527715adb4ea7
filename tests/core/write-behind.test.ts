/**
 * The write-behind queue (src/db/write-behind.ts) on its own: batches at maxBatch, and what
 * happens to a batch that fails to write, with and without keepFailed.
 */
import { afterEach, describe, expect, spyOn, test, type Mock } from "bun:test";
import { createWriteBehind, type WriteBehind } from "../../src/db/write-behind";

let queue: WriteBehind<number> | null = null;
let errors: Mock<typeof console.error> | null = null;
afterEach(() => {
  queue?.close();
  errors?.mockRestore();
});

/** A queue whose writer records each batch and fails while `failing.now` is true; error lines are captured. */
function recording(keepFailed: boolean, maxBatch = 4) {
  errors = spyOn(console, "error").mockImplementation(() => {});
  const batches: number[][] = [];
  const failing = { now: false };
  queue = createWriteBehind<number>(
    (rows) => {
      batches.push([...rows]);
      if (failing.now) throw new Error("disk I/O error");
    },
    { label: "test", maxBatch, intervalMs: 60_000, keepFailed },
  );
  return { queue, batches, failing, errors };
}

describe("write-behind", () => {
  test("reaching maxBatch writes the batch once, right after the current task", async () => {
    const { queue, batches } = recording(false);
    for (let i = 0; i < 4; i++) queue.push(i);
    expect(batches).toEqual([]);
    await Promise.resolve();
    expect(batches).toEqual([[0, 1, 2, 3]]);
  });

  test("a failed batch is dropped by default; later rows are written", async () => {
    const { queue, batches, failing, errors } = recording(false);
    failing.now = true;
    queue.push(1);
    queue.flush();
    failing.now = false;
    queue.push(2);
    queue.flush();
    expect(batches).toEqual([[1], [2]]);
    expect(String(errors.mock.calls[0]?.[0])).toContain("test: write failed, 1 row(s) dropped");
  });

  test("with keepFailed a failed batch stays first in line and is written with the next flush, in order", async () => {
    const { queue, batches, failing, errors } = recording(true);
    failing.now = true;
    queue.push(1);
    queue.push(2);
    queue.flush();
    failing.now = false;
    queue.push(3);
    queue.flush();
    expect(batches).toEqual([[1, 2], [1, 2, 3]]);
    expect(String(errors.mock.calls[0]?.[0])).toContain("test: write failed, 2 row(s) kept to retry");
  });

  test("kept rows past maxBatch wait for the next flush instead of a retry per push", async () => {
    const { queue, batches, failing } = recording(true);
    failing.now = true;
    for (let i = 0; i < 4; i++) queue.push(i);
    await Promise.resolve();
    for (let i = 4; i < 10; i++) queue.push(i);
    await Promise.resolve();
    expect(batches).toHaveLength(1);
    failing.now = false;
    queue.flush();
    expect(batches.at(-1)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  test("closeWithin keeps trying a failing write until it succeeds, within its time (regression: a stop lost queued debits)", async () => {
    const { queue, batches, failing } = recording(true);
    queue.push(1);
    queue.push(2);
    failing.now = true;
    setTimeout(() => (failing.now = false), 250);
    expect(await queue.closeWithin(5_000)).toEqual([]);
    expect(batches.at(-1)).toEqual([1, 2]);
    expect(batches.length).toBeGreaterThan(1);
  });

  test("closeWithin returns the rows still unwritten when its time runs out", async () => {
    const { queue, failing } = recording(true);
    failing.now = true;
    queue.push(7);
    expect(await queue.closeWithin(150)).toEqual([7]);
  });
});
