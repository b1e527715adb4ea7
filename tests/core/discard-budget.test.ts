/**
 * The budget for reading oversized bodies only to drop them (src/discard-budget.ts): a burst is
 * read, a flood is refused unread, and the budget refills with time. The clock is injected.
 */
import { expect, test } from "bun:test";
import { DiscardBudget } from "../../src/discard-budget";
import { readJsonBody, BodyBudget } from "../../src/body";

const MiB = 1024 * 1024;

test("a burst is taken, then nothing until the budget refills at its rate", () => {
  let now = 0;
  const budget = new DiscardBudget(() => now, 20 * MiB, 10 * MiB);
  expect(budget.take(11 * MiB)).toBe(true);
  expect(budget.take(11 * MiB)).toBe(false);
  expect(budget.take(9 * MiB)).toBe(true);
  now += 500; // 5 MiB back
  expect(budget.take(6 * MiB)).toBe(false);
  expect(budget.take(5 * MiB)).toBe(true);
  now += 60_000; // never more than the burst
  expect(budget.take(21 * MiB)).toBe(false);
  expect(budget.take(20 * MiB)).toBe(true);
});

test("past the budget, an oversized upload is refused with the 413 without its body being read", async () => {
  let pulled = 0;
  // A body that never ends: reading it would never finish.
  const body = new ReadableStream<Uint8Array>({ pull: () => void (pulled += 1) });
  const request = new Request("http://gateway/v1/chat/completions", { method: "POST", body, headers: { "content-length": String(11 * MiB) } });
  const exhausted = new DiscardBudget(() => 0, 1 * MiB, 1 * MiB);
  const refused = await readJsonBody(request, 10 * MiB, 11 * MiB, new BodyBudget(1 << 30), exhausted).catch((err: unknown) => err);
  expect((refused as { status?: number }).status).toBe(413);
  expect(pulled).toBeLessThanOrEqual(1);
  // Not held back: held open, the client would go on sending and the kernel receiving.
  expect((refused as { options: { holdMs?: number } }).options.holdMs).toBeUndefined();
});
