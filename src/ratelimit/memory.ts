/**
 * The in-memory rate limiter: one token bucket per subject (capacity = the limit, refilled
 * continuously), plus an optional fixed window per subject (the anonymous daily limit; the window
 * opens with the subject's first request). Decisions are synchronous, so concurrent requests on one
 * event loop are counted exactly: a fresh 60/min bucket lets exactly 60 of a burst through.
 *
 * Memory stays bounded: an entry whose bucket has refilled and whose window has closed decides
 * exactly like a missing one, so sweep() (every `sweepMs`) deletes it; and at `maxSubjects`
 * entries the oldest are dropped down to 90% of it (only reachable when that many subjects are
 * active at once; a dropped subject starts again with a full bucket and a fresh window). Those with
 * the most allowance left go first, those being refused last: otherwise a flood of new subjects
 * would hand fresh allowance to the very ones the limit holds back (an account's guesser, an
 * address near the end of its day).
 * Time comes from the injected clock; nothing here sleeps.
 */
import type { RateDecision, RateLimiter, RatePolicy } from "./types";

export interface MemoryLimiterOptions {
  now?: () => number;
  sweepMs?: number;
  maxSubjects?: number;
}

class Entry {
  tokens: number;
  at: number;
  /** Bucket shape of the last policy applied, so sweep() knows when it is full again. */
  capacity: number;
  periodMs: number;
  windowStart = -1;
  windowCount = 0;
  windowMs = 0;
  windowLimit = 0;
  constructor(capacity: number, periodMs: number, now: number) {
    this.tokens = capacity;
    this.capacity = capacity;
    this.periodMs = periodMs;
    this.at = now;
  }
}

/** A limiter that decides at once (what the sign-in throttle and tests rely on). */
export interface MemoryLimiter extends RateLimiter {
  take(subject: string, policy: RatePolicy): RateDecision;
}

export function createMemoryLimiter(options: MemoryLimiterOptions = {}): MemoryLimiter {
  const now = options.now ?? Date.now;
  const maxSubjects = options.maxSubjects ?? 250_000;
  const entries = new Map<string, Entry>();

  function tokensAt(e: Entry, t: number): number {
    return Math.min(e.capacity, e.tokens + (t - e.at) * (e.capacity / e.periodMs));
  }

  function windowOpenAt(e: Entry, t: number): boolean {
    return e.windowStart !== -1 && t - e.windowStart < e.windowMs;
  }

  /** An entry whose bucket has refilled and whose window has closed decides exactly like a missing one. */
  function forgettable(e: Entry, t: number): boolean {
    return tokensAt(e, t) >= e.capacity && !windowOpenAt(e, t);
  }

  function sweep(): void {
    const t = now();
    for (const [subject, e] of entries) if (forgettable(e, t)) entries.delete(subject);
  }

  /**
   * How much `e` would still allow at `t`: 0 for three quarters or more of its limit (bucket and
   * window both), 1 for half or more, 2 for at least one request, 3 for none.
   */
  function tierOf(e: Entry, t: number): number {
    const tokens = tokensAt(e, t);
    const windowOpen = windowOpenAt(e, t);
    const left = windowOpen ? Math.min(tokens, e.windowLimit - e.windowCount) : tokens;
    const limit = windowOpen ? Math.min(e.capacity, e.windowLimit) : e.capacity;
    if (left < 1) return 3;
    return left >= 0.75 * limit ? 0 : left >= 0.5 * limit ? 1 : 2;
  }

  function admitNew(subject: string, entry: Entry): void {
    if (entries.size >= maxSubjects) {
      // Make room for a tenth of the cap at once, so a flood of new subjects costs O(1) each. One
      // pass forgets what sweep() would and sorts the rest into tiers; Map iteration is insertion
      // order, so within a tier the oldest go first.
      const t = now();
      const target = Math.floor(maxSubjects * 0.9);
      const tiers: string[][] = [[], [], [], []];
      for (const [key, e] of entries) {
        if (forgettable(e, t)) entries.delete(key);
        else tiers[tierOf(e, t)].push(key);
      }
      for (const tier of tiers) {
        for (const key of tier) {
          if (entries.size <= target) break;
          entries.delete(key);
        }
      }
    }
    entries.set(subject, entry);
  }

  const timer = setInterval(sweep, options.sweepMs ?? 30_000);
  timer.unref?.();

  return {
    take(subject: string, policy: RatePolicy): RateDecision {
      const t = now();
      let e = entries.get(subject);
      if (e === undefined) {
        e = new Entry(policy.limit, policy.periodMs, t);
        admitNew(subject, e);
      }
      const rate = policy.limit / policy.periodMs;
      e.tokens = Math.min(policy.limit, e.tokens + Math.max(0, t - e.at) * rate);
      e.at = t;
      e.capacity = policy.limit;
      e.periodMs = policy.periodMs;
      const bucketOk = e.tokens >= 1;

      const window = policy.window;
      let windowOk = true;
      if (window !== undefined) {
        if (e.windowStart === -1 || t - e.windowStart >= window.ms) {
          e.windowStart = t;
          e.windowCount = 0;
        }
        e.windowMs = window.ms;
        e.windowLimit = window.limit;
        windowOk = e.windowCount < window.limit;
      }
      const allowed = bucketOk && windowOk;
      if (allowed) {
        e.tokens -= 1;
        if (window !== undefined) e.windowCount += 1;
      }

      const bucketRemaining = Math.floor(e.tokens);
      const bucket: RateDecision = {
        allowed,
        binding: "bucket",
        limit: policy.limit,
        remaining: bucketRemaining,
        resetMs: (policy.limit - e.tokens) / rate,
        retryAfterMs: bucketOk ? 0 : (1 - e.tokens) / rate,
      };
      if (window === undefined) return bucket;
      const windowRemaining = window.limit - e.windowCount;
      const windowReset = e.windowStart + window.ms - t;
      // On a tie the window is described: it is the one that takes longer to come back.
      if (windowOk && windowRemaining > bucketRemaining) return bucket;
      return {
        allowed,
        binding: "window",
        limit: window.limit,
        remaining: windowRemaining,
        resetMs: windowReset,
        retryAfterMs: Math.max(bucket.retryAfterMs, windowOk ? 0 : windowReset),
      };
    },
    charge(subject: string, policy: RatePolicy, amount: number): void {
      if (!(amount > 0)) return;
      const e = entries.get(subject);
      if (e === undefined) return;
      const t = now();
      e.tokens = Math.min(policy.limit, e.tokens + Math.max(0, t - e.at) * (policy.limit / policy.periodMs)) - amount;
      e.at = t;
    },
    giveBack(subject: string, policy: RatePolicy): void {
      const e = entries.get(subject);
      if (e === undefined) return;
      e.tokens = Math.min(policy.limit, e.tokens + 1);
      if (policy.window !== undefined && e.windowCount > 0) e.windowCount -= 1;
    },
    size: () => entries.size,
    sweep,
    close: () => clearInterval(timer),
  };
}
