// The one retry-delay rule: exponential, capped, and shortened at random by at most a fifth.
import { describe, expect, test } from "bun:test";
import { backoffDelay, JITTER } from "../../src/backoff";

describe("backoffDelay", () => {
  test("doubles from the first delay per failure, up to the cap, when the jitter takes nothing", () => {
    const none = { firstMs: 1_000, maxMs: 60_000, random: () => 0 };
    expect([1, 2, 3, 4, 6, 7, 50].map((n) => backoffDelay(n, none))).toEqual([1_000, 2_000, 4_000, 8_000, 32_000, 60_000, 60_000]);
    expect(backoffDelay(0, none)).toBe(1_000);
  });

  test("the jitter only shortens a delay, by at most JITTER of it, so neither the delay nor the cap is ever exceeded", () => {
    expect(backoffDelay(3, { firstMs: 1_000, maxMs: 60_000, random: () => 0.999999 })).toBe(Math.round(4_000 * (1 - JITTER * 0.999999)));
    for (let i = 0; i < 1_000; i++) {
      const capped = backoffDelay(20, { firstMs: 1_000, maxMs: 60_000 });
      expect(capped).toBeLessThanOrEqual(60_000);
      expect(capped).toBeGreaterThanOrEqual(60_000 * (1 - JITTER));
    }
  });

  test("retries that failed together are spread out, not brought back together", () => {
    const delays = new Set(Array.from({ length: 200 }, () => backoffDelay(5, { firstMs: 1_000, maxMs: 300_000 })));
    expect(delays.size).toBeGreaterThan(100);
  });
});
