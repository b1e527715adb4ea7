import { describe, expect, test } from "bun:test";
import { createMemoryLimiter } from "../../src/ratelimit/memory";
import { formatDuration, policyFromLimit, rateLimitHeaders, DAY_MS } from "../../src/ratelimit/types";

function clock(start = 1_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}

const perMinute60 = policyFromLimit({ per_minute: 60 });
const anonymous = policyFromLimit({ per_minute: 10, per_day: 5 });

describe("token bucket", () => {
  test("a fresh bucket lets exactly its capacity through a burst at one instant", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const allowed = Array.from({ length: 1000 }, () => limiter.take("key:a", perMinute60).allowed).filter(Boolean).length;
    expect(allowed).toBe(60);
    limiter.close();
  });

  test("refills continuously: one request per second at 60/min", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    for (let i = 0; i < 60; i++) limiter.take("key:a", perMinute60);
    const denied = limiter.take("key:a", perMinute60);
    expect(denied.allowed).toBe(false);
    expect(denied.retryAfterMs).toBe(1000);
    c.t += 999;
    expect(limiter.take("key:a", perMinute60).allowed).toBe(false);
    c.t += 1;
    expect(limiter.take("key:a", perMinute60).allowed).toBe(true);
    expect(limiter.take("key:a", perMinute60).allowed).toBe(false);
    c.t += 30_000;
    const after = limiter.take("key:a", perMinute60);
    expect(after.allowed).toBe(true);
    expect(after.remaining).toBe(29);
    limiter.close();
  });

  test("never refills beyond capacity, and subjects are independent", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    limiter.take("key:a", perMinute60);
    c.t += 10 * 60_000;
    expect(limiter.take("key:a", perMinute60).remaining).toBe(59);
    expect(limiter.take("key:b", perMinute60).remaining).toBe(59);
    limiter.close();
  });

  test("a per-subject override applies its own capacity", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const five = policyFromLimit({ per_minute: 5 });
    const allowed = Array.from({ length: 20 }, () => limiter.take("key:small", five).allowed).filter(Boolean).length;
    expect(allowed).toBe(5);
    limiter.close();
  });

  test("a clock that steps backwards does not mint tokens", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    for (let i = 0; i < 60; i++) limiter.take("key:a", perMinute60);
    c.t -= 3_600_000;
    expect(limiter.take("key:a", perMinute60).allowed).toBe(false);
    limiter.close();
  });
});

describe("anonymous daily window", () => {
  test("5 a day, counted from the first request, then open again after 24 h", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const results: boolean[] = [];
    for (let i = 0; i < 7; i++) {
      results.push(limiter.take("ip:203.0.113.7", anonymous).allowed);
      c.t += 60_000; // well inside the per-minute limit
    }
    expect(results).toEqual([true, true, true, true, true, false, false]);
    const denied = limiter.take("ip:203.0.113.7", anonymous);
    expect(denied.binding).toBe("window");
    expect(denied.limit).toBe(5);
    expect(denied.remaining).toBe(0);
    expect(denied.retryAfterMs).toBe(DAY_MS - 7 * 60_000);
    c.t += DAY_MS - 7 * 60_000 - 1;
    expect(limiter.take("ip:203.0.113.7", anonymous).allowed).toBe(false);
    c.t += 1;
    const reopened = limiter.take("ip:203.0.113.7", anonymous);
    expect(reopened.allowed).toBe(true);
    expect(reopened.remaining).toBe(4);
    limiter.close();
  });

  test("when both limits have as much left, the headers describe the window, which takes longer to come back (regression: `reset 1m0s`, then a 24-hour 429)", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const even = policyFromLimit({ per_minute: 5, per_day: 5 });
    const decisions = [1, 2, 3, 4, 5].map(() => limiter.take("ip:a", even));
    expect(decisions.map((d) => d.binding)).toEqual(["window", "window", "window", "window", "window"]);
    expect(decisions[4]).toMatchObject({ allowed: true, remaining: 0, resetMs: DAY_MS });
    limiter.close();
  });

  test("giveBack returns one request to the bucket and to the window, never past the limit", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    for (let i = 0; i < 5; i++) limiter.take("ip:a", anonymous);
    expect(limiter.take("ip:a", anonymous).allowed).toBe(false);
    limiter.giveBack("ip:a", anonymous);
    expect(limiter.take("ip:a", anonymous)).toMatchObject({ allowed: true, remaining: 0 });
    limiter.giveBack("ip:fresh", anonymous); // unknown: nothing to return, nothing created
    expect(limiter.size()).toBe(1);
    const b = limiter.take("ip:b", perMinute60);
    limiter.giveBack("ip:b", perMinute60);
    limiter.giveBack("ip:b", perMinute60);
    expect(limiter.take("ip:b", perMinute60).remaining).toBe(59);
    expect(b.remaining).toBe(59);
    limiter.close();
  });

  test("the per-minute limit binds inside the day; a denial by either counts against neither", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const tight = policyFromLimit({ per_minute: 2, per_day: 5 });
    expect([1, 2, 3].map(() => limiter.take("ip:a", tight).allowed)).toEqual([true, true, false]);
    c.t += 60_000;
    // Two more tokens; the denied third request above did not use up the day.
    expect([1, 2, 3].map(() => limiter.take("ip:a", tight).allowed)).toEqual([true, true, false]);
    c.t += 60_000;
    expect([1, 2].map(() => limiter.take("ip:a", tight).allowed)).toEqual([true, false]);
    limiter.close();
  });
});

describe("bounded memory", () => {
  test("sweep() forgets full buckets and closed windows, keeps live ones", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    for (let i = 0; i < 10_000; i++) limiter.take(`ip:${i}`, perMinute60);
    limiter.take("ip:daily", anonymous);
    expect(limiter.size()).toBe(10_001);
    c.t += 1_000; // one token back: every bucket is full again, the daily window is still open
    limiter.sweep();
    expect(limiter.size()).toBe(1);
    c.t += DAY_MS;
    limiter.sweep();
    expect(limiter.size()).toBe(0);
    limiter.close();
  });

  test("a swept subject decides exactly as if it had been kept", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    for (let i = 0; i < 60; i++) limiter.take("key:a", perMinute60);
    c.t += 60_000;
    limiter.sweep();
    expect(limiter.size()).toBe(0);
    const burst = Array.from({ length: 100 }, () => limiter.take("key:a", perMinute60).allowed).filter(Boolean).length;
    expect(burst).toBe(60);
    limiter.close();
  });

  test("at the cap, subjects with the most allowance left go first: a flood of new ones does not hand fresh attempts to one held back", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now, maxSubjects: 100 });
    // The sign-in throttle's account policy: 5 attempts, then one a minute.
    const perAccount = { limit: 5, periodMs: 5 * 60_000 };
    for (let i = 0; i < 6; i++) limiter.take("account:locked", perAccount);
    for (let i = 0; i < 6; i++) limiter.take("account:one-back", perAccount);
    // An address with its day used up, and one with a single request of its day left.
    for (let i = 0; i < 5; i++) limiter.take("ip:day-spent", anonymous);
    for (let i = 0; i < 4; i++) limiter.take("ip:one-left", anonymous);
    c.t += 61_000; // "one-back" has one attempt again (and "locked" too; it is used below)
    limiter.take("account:locked", perAccount);
    // A flood of new subjects, one attempt each, pushes the table past its cap ten times over.
    for (let i = 0; i < 1_000; i++) limiter.take(`account:flood-${i}`, perAccount);
    expect(limiter.size()).toBeLessThanOrEqual(100);
    expect(limiter.take("account:locked", perAccount).allowed).toBe(false);
    expect([limiter.take("account:one-back", perAccount).allowed, limiter.take("account:one-back", perAccount).allowed]).toEqual([true, false]);
    expect(limiter.take("ip:day-spent", anonymous).allowed).toBe(false);
    expect([limiter.take("ip:one-left", anonymous).allowed, limiter.take("ip:one-left", anonymous).allowed]).toEqual([true, false]);
    // With every subject held back, the oldest go as before: memory stays bounded.
    for (let i = 0; i < 1_000; i++) for (let j = 0; j < 6; j++) limiter.take(`account:locked-${i}`, perAccount);
    expect(limiter.size()).toBeLessThanOrEqual(100);
    limiter.close();
  });

  test("never holds more than maxSubjects, however many distinct addresses call", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now, maxSubjects: 1_000 });
    for (let i = 0; i < 200_000; i++) limiter.take(`ip:${i}`, anonymous);
    expect(limiter.size()).toBeLessThanOrEqual(1_000);
    limiter.close();
  });
});

describe("headers", () => {
  test("OpenAI's x-ratelimit-* names and duration format; Retry-After on a denial", () => {
    const c = clock();
    const limiter = createMemoryLimiter({ now: c.now });
    const first = rateLimitHeaders(limiter.take("key:h", perMinute60));
    expect(first).toEqual({
      "x-ratelimit-limit-requests": "60",
      "x-ratelimit-remaining-requests": "59",
      "x-ratelimit-reset-requests": "1s",
    });
    for (let i = 0; i < 59; i++) limiter.take("key:h", perMinute60);
    const denied = rateLimitHeaders(limiter.take("key:h", perMinute60));
    expect(denied["x-ratelimit-remaining-requests"]).toBe("0");
    expect(denied["x-ratelimit-reset-requests"]).toBe("1m0s");
    expect(denied["retry-after"]).toBe("1");
    limiter.close();
  });

  test("formatDuration", () => {
    expect(formatDuration(0)).toBe("0s");
    expect(formatDuration(250)).toBe("250ms");
    expect(formatDuration(1000)).toBe("1s");
    expect(formatDuration(360_000)).toBe("6m0s");
    expect(formatDuration(DAY_MS - 48_000)).toBe("23h59m12s");
  });
});
