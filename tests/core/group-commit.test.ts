/**
 * groupPerTurn (src/db/group-commit.ts): what is asked for in one event-loop turn is written in one
 * call, each caller gets its own result, and a failed write fails every caller of its group.
 */
import { describe, expect, test } from "bun:test";
import { groupPerTurn } from "../../src/db/group-commit";

describe("groupPerTurn", () => {
  test("the writes of one turn share one call, in order, each caller getting its own result", async () => {
    const calls: string[][] = [];
    const write = groupPerTurn((items: string[]) => {
      calls.push(items);
      return items.map((item) => item.toUpperCase());
    });
    const first = await Promise.all(["a", "b", "c"].map(write));
    const later = await write("d");
    expect(first).toEqual(["A", "B", "C"]);
    expect(later).toBe("D");
    expect(calls).toEqual([["a", "b", "c"], ["d"]]);
  });

  test("nothing is written before the caller's turn ends", async () => {
    let written = 0;
    const write = groupPerTurn((items: number[]) => {
      written += items.length;
      return items;
    });
    const pending = write(1);
    await Promise.resolve();
    expect(written).toBe(0);
    await pending;
    expect(written).toBe(1);
  });

  test("a write that throws rejects every caller of its group, and the next group is written", async () => {
    let fail = true;
    const write = groupPerTurn((items: number[]) => {
      if (fail) throw new Error("database is locked");
      return items;
    });
    const outcomes = await Promise.allSettled([write(1), write(2)]);
    expect(outcomes.map((o) => o.status)).toEqual(["rejected", "rejected"]);
    fail = false;
    expect(await write(3)).toBe(3);
  });

  test("a write that returns a promise (Postgres) settles its callers when it does: with results, or its rejection", async () => {
    let fail = false;
    const write = groupPerTurn(async (items: number[]) => {
      await Bun.sleep(1);
      if (fail) throw new Error("connection refused");
      return items.map((item) => item * 2);
    });
    expect(await Promise.all([1, 2, 3].map(write))).toEqual([2, 4, 6]);
    fail = true;
    const refused = await Promise.allSettled([4, 5].map(write));
    expect(refused.map((r) => (r.status === "rejected" ? String(r.reason) : r.status))).toEqual(["Error: connection refused", "Error: connection refused"]);
  });
});
