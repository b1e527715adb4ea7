/**
 * The reservation a paid request is allowed out of an available amount (src/credits/reservation.ts):
 * its maximum cost when covered, else its completion cut to what the amount pays for, else refused;
 * never more than the amount.
 */
import { describe, expect, test } from "bun:test";
import { MIN_COMPLETION_TOKENS, reserveWithin } from "../../src/credits/reservation";
import { tokensCostMicro } from "../../src/credits/cost";

const price = { prompt: 10, completion: 20 };
const bodyBytes = 400; // 100 prompt tokens: 1,000 micro-credits
const reserve = (availableMicro: number, body: Record<string, unknown> = {}, p = price) =>
  reserveWithin({ price: p, body, bodyBytes, defaultMaxTokens: 1_000, availableMicro });

describe("reserveWithin", () => {
  test("covered: the request's maximum cost, its own limit kept", () => {
    expect(reserve(1_000 + 20 * 1_000)).toEqual({ micro: 21_000, completionLimit: null });
    expect(reserve(10_000, { max_tokens: 50, n: 2 })).toEqual({ micro: 1_000 + 20 * 100, completionLimit: null });
  });

  test("not covered: the completion per choice cut to what is left after the prompt, whatever the request asked", () => {
    expect(reserve(1_000 + 20 * 300 + 19)).toEqual({ micro: 1_000 + 20 * 300, completionLimit: 300 });
    expect(reserve(1_000 + 20 * 300, { max_tokens: 1e308, n: 3 })).toEqual({ micro: 1_000 + 20 * 300, completionLimit: 100 });
  });

  test("refused below the prompt and MIN_COMPLETION_TOKENS per choice (or the request's own smaller limit), and at zero", () => {
    const least = 1_000 + 20 * MIN_COMPLETION_TOKENS;
    expect(reserve(least - 1)).toEqual({ neededMicro: least });
    expect(reserve(least)).toEqual({ micro: least, completionLimit: MIN_COMPLETION_TOKENS });
    expect(reserve(1_000 + 20 * 2 - 1, { max_tokens: 2 })).toEqual({ neededMicro: 1_040 });
    expect(reserve(0, {}, { prompt: 0, completion: 0 })).toEqual({ neededMicro: 1 });
  });

  test("a price with decimals: the reservation is never above the amount, and uses all a token more would pass", () => {
    const decimals = { prompt: 0.07, completion: 0.333333 };
    for (const available of [20, 21, 100, 777, 12_345, 999_999]) {
      const r = reserve(available, { max_tokens: 1e9 }, decimals);
      if ("neededMicro" in r) continue;
      expect(r.micro).toBeLessThanOrEqual(available);
      expect(tokensCostMicro(100, r.completionLimit! + 1, decimals)).toBeGreaterThan(available);
    }
  });
});
