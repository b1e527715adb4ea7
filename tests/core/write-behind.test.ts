/**
 * The write-behind queue (src/db/write-behind.ts) on its own: batches at maxBatch, and what
 * happens to a batch that fails to write, with and without keepFailed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createWriteBehind, type WriteBehind } from "../../src/db/write-behind";
import { captureLog, type CapturedLog } from "../support/log";

let queue: WriteBehind<number> | null = null;
let captured: CapturedLog | null = null;
afterEach(() => {
  queue?.close();
  captured?.restore();
});

/** A queue whose writer records each batch and fails while `failing.now` is true; error lines are captured. */
/** The queue's clock: each test moves it past a backoff by hand. */
let clock = 0;

function recording(keepFailed: boolean, maxBatch = 4, more: { maxKept?: number; intervalMs?: number } = {}) {
  captured = captureLog();
  const batches: number[][] = [];
  const accepted: number[][] = [];
  const failing = { now: false };
  clock = 0;
  queue = createWriteBehind<number>(
    (rows) => {
      batches.push([...rows]);
      if (failing.now) throw new Error("disk I/O error");
    },
    { label: "test", maxBatch, intervalMs: 60_000, keepFailed, accept: (rows) => void accepted.push([...rows]), now: () => clock, random: () => 0, ...more },
  );
  const lines = (): string[] => captured!.lines();
  return { queue, batches, accepted, failing, lines };
}

describe("write-behind", () => {
  test("reaching maxBatch writes the batch once, right after the current task", async () => {
    const { queue, batches } = recording(false);
    for (let i = 0; i < 4; i++) queue.push(i);
    expect(batches).toEqual([]);
    await Promise.resolve();
    expect(batches).toEqual([[0, 1, 2, 3]]);
  });

  test("flushSoon: every caller in one event-loop turn shares one write, at the end of that turn", async () => {
    const { queue, batches } = recording(true, 100_000);
    const waits = Array.from({ length: 1_000 }, (_, i) => (queue.push(i), queue.flushSoon()));
    expect(new Set(waits).size).toBe(1);
    await Promise.resolve();
    expect(batches).toEqual([]); // not before the turn's other callbacks have run
    await waits[0];
    expect(batches).toEqual([Array.from({ length: 1_000 }, (_, i) => i)]);
    queue.push(1_000);
    await queue.flushSoon(); // the next turn has a write of its own
    expect(batches).toEqual([Array.from({ length: 1_000 }, (_, i) => i), [1_000]]);
  });

  test("flushSoon resolves after a failed attempt too, leaving the rows kept", async () => {
    const { queue, batches, failing } = recording(true);
    failing.now = true;
    queue.push(1);
    await queue.flushSoon();
    expect(batches).toEqual([[1]]);
    failing.now = false;
    clock += 60_000;
    queue.flush();
    expect(batches).toEqual([[1], [1]]);
  });

  test("a failed batch is dropped by default; later rows are written", async () => {
    const { queue, batches, failing, lines } = recording(false);
    failing.now = true;
    queue.push(1);
    queue.flush();
    failing.now = false;
    queue.push(2);
    clock += 2_000;
    queue.flush();
    expect(batches).toEqual([[1], [2]]);
    expect(String(lines()[0])).toContain("test: write failed, 1 row(s) dropped");
  });

  test("with keepFailed a failed batch stays first in line and is written with the next flush, in order", async () => {
    const { queue, batches, failing, lines } = recording(true);
    failing.now = true;
    queue.push(1);
    queue.push(2);
    queue.flush();
    failing.now = false;
    queue.push(3);
    clock += 2_000;
    queue.flush();
    expect(batches).toEqual([
      [1, 2],
      [1, 2, 3],
    ]);
    expect(String(lines()[0])).toContain("test: write failed, 2 row(s) kept to retry");
  });

  test("after a failure the next attempt waits out a backoff that doubles up to 2 s; rows are accepted meanwhile", () => {
    const { queue, batches, accepted, failing } = recording(true, 100, { intervalMs: 100 });
    failing.now = true;
    queue.push(1);
    queue.flush(); // fails at 0: next attempt from 100
    clock = 99;
    queue.push(2);
    queue.flush();
    expect(batches).toEqual([[1]]);
    expect(accepted).toEqual([[1], [2]]); // counted and logged on time, though not yet written
    clock = 100;
    queue.flush(); // fails again: next from 300
    clock = 299;
    queue.flush();
    expect(batches).toHaveLength(2);
    clock = 300;
    queue.flush(); // third failure: 400 ms
    clock = 700;
    queue.flush(); // 800
    clock = 1_500;
    queue.flush(); // 1600, then capped at 2000
    clock = 3_100;
    queue.flush();
    clock = 5_099;
    queue.flush();
    expect(batches).toHaveLength(6);
    failing.now = false;
    clock = 5_100;
    queue.flush();
    expect(batches).toHaveLength(7);
    expect(batches.at(-1)).toEqual([1, 2]);
    expect(accepted).toEqual([[1], [2]]);
  });

  test("a long failure logs its start, each drop past maxKept and the recovery, not every attempt", () => {
    const { queue, batches, failing, lines } = recording(true, 100, { maxKept: 3 });
    failing.now = true;
    queue.push(1);
    queue.push(2);
    queue.flush();
    clock += 2_000;
    queue.flush();
    queue.push(3);
    queue.push(4);
    queue.push(5);
    clock += 2_000;
    queue.flush();
    failing.now = false;
    clock += 2_000;
    queue.flush();
    expect(batches.at(-1)).toEqual([3, 4, 5]);
    expect(lines().map((line) => JSON.parse(line).msg)).toEqual([
      "test: write failed, 2 row(s) kept to retry",
      "test: write still failing, 2 oldest row(s) dropped (at most 3 are kept)",
      "test: written again after 3 failed attempt(s)",
    ]);
  });

  test("rows reaching maxBatch during a backoff do not bring the next attempt forward", async () => {
    const { queue, batches, failing } = recording(true);
    failing.now = true;
    for (let i = 0; i < 4; i++) queue.push(i);
    await Promise.resolve();
    for (let i = 4; i < 10; i++) queue.push(i);
    await Promise.resolve();
    expect(batches).toHaveLength(1);
    failing.now = false;
    clock += 2_000;
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

  describe("with a writer that returns a promise (Postgres)", () => {
    /** A queue whose writes wait until the test settles them, one call at a time. */
    function deferred() {
      captured = captureLog();
      clock = 0;
      const batches: number[][] = [];
      const settles: Array<(error?: Error) => void> = [];
      queue = createWriteBehind<number>(
        (rows) => {
          batches.push([...rows]);
          return new Promise<void>((resolve, reject) => settles.push((error) => (error ? reject(error) : resolve())));
        },
        { label: "test", maxBatch: 100, intervalMs: 60_000, keepFailed: true, now: () => clock, random: () => 0 },
      );
      return { queue, batches, settles };
    }

    test("flushSoon resolves once the write holding its rows has committed, and one batch is in flight at a time", async () => {
      const { queue, batches, settles } = deferred();
      queue.push(1);
      let firstDone = false;
      const first = queue.flushSoon().then(() => (firstDone = true));
      await Bun.sleep(1);
      expect(batches).toEqual([[1]]);
      queue.push(2);
      let secondDone = false;
      const second = queue.flushSoon().then(() => (secondDone = true));
      queue.flush(); // a timer's flush meanwhile adds no write of its own
      await Bun.sleep(1);
      expect(batches).toEqual([[1]]); // 2 waits for the write in flight
      expect(firstDone).toBe(false);
      settles[0]();
      await first;
      await Bun.sleep(1);
      expect(batches).toEqual([[1], [2]]);
      expect(secondDone).toBe(false);
      settles[1]();
      await second;
      expect(queue.failingSince()).toBeNull();
    });

    test("a refused batch stays queued ahead of rows pushed while it was in flight, and is written once later", async () => {
      const { queue, batches, settles } = deferred();
      queue.push(1);
      const first = queue.flushSoon();
      await Bun.sleep(1);
      queue.push(2);
      queue.flush();
      settles[0](new Error("connection refused"));
      await first;
      expect(queue.failingSince()).toBe(0);
      expect(batches).toEqual([[1]]); // the follow-up waits out the backoff
      clock += 2_000;
      const retried = queue.flush();
      expect(batches).toEqual([[1], [1, 2]]);
      settles[1]();
      await retried;
      expect(queue.failingSince()).toBeNull();
      expect(captured!.lines().map((line) => JSON.parse(line).msg)).toEqual([
        "test: write failed, 1 row(s) kept to retry",
        "test: written again after 1 failed attempt(s)",
      ]);
    });
  });
});
