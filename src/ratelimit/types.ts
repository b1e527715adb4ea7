/**
 * The rate-limiter seam. A limiter answers one question: may `subject` make one more request under
 * `policy` now? It counts the request only when the answer is yes. The in-memory implementation
 * (memory.ts) answers at once; the Redis one (redis.ts, replicas sharing limits) answers with a
 * promise, which rejects when Redis cannot be asked (the caller refuses the request: 503). Callers
 * test for a promise, so the in-memory path stays synchronous.
 * Also here: the x-ratelimit-* / Retry-After headers a decision produces, in OpenAI's format.
 */
import { GatewayError } from "../errors";

export interface RatePolicy {
  /** Bucket capacity; the bucket refills continuously at `limit` per `periodMs`. */
  limit: number;
  periodMs: number;
  /** Optional second limit: at most `limit` requests per window of `ms`, opened by the first. */
  window?: { limit: number; ms: number };
}

export interface RateDecision {
  allowed: boolean;
  /** Which limit the numbers describe: the bucket, or the window when it is the tighter one. */
  binding: "bucket" | "window";
  /** The limit that binds. */
  limit: number;
  remaining: number;
  /** Time until the binding limit is fully restored, ms. */
  resetMs: number;
  /** When denied: time until one request would be allowed, ms. Otherwise 0. */
  retryAfterMs: number;
}

/** A decision now (in memory), or later (a shared store). */
export type Decided = RateDecision | Promise<RateDecision>;

/** A decision from a limiter that answered a first take at once: it answers every take so. */
export function decidedNow(decided: Decided): RateDecision {
  if (decided instanceof Promise) throw new TypeError("a rate limiter answered one take at once and the next one later");
  return decided;
}

export interface RateLimiter {
  take(subject: string, policy: RatePolicy): Decided;
  /**
   * Takes `amount` more from the subject's bucket after the fact, into debt if need be (tokens per
   * minute: a request is admitted while the bucket is not empty, and charged what it used when it ends).
   */
  charge(subject: string, policy: RatePolicy, amount: number): void;
  /** Returns one request that take() allowed but nobody served (an outage): to the bucket and to the window. */
  giveBack(subject: string, policy: RatePolicy): void;
  /** Number of subjects currently held in this process's memory (for tests; 0 for a shared store). */
  size(): number;
  /** Drops state that no longer affects any decision (full buckets, closed windows). */
  sweep(): void;
  close(): void;
}

/** Seconds a client is told to wait when the shared limits cannot be asked. */
const UNAVAILABLE_RETRY_S = 1;

/**
 * The 503 for a request whose limit could not be checked (Redis unreachable or late): refused,
 * never let through unlimited, and not counted anywhere.
 */
export function limitsUnavailable(): GatewayError {
  return new GatewayError(
    "service_unavailable",
    "Rate limits are kept in Redis ([cluster] redis_url), which this gateway cannot reach just now; the request was refused, not served. Retry shortly",
    { headers: { "retry-after": String(UNAVAILABLE_RETRY_S) }, extra: { reason: "rate_limits_unavailable" } },
  );
}

export const MINUTE_MS = 60_000;
export const DAY_MS = 86_400_000;

/** A policy from a `[limits]` entry: `per_minute`, optionally `per_day` (0: none). */
export function policyFromLimit(limit: { per_minute: number; per_day?: number }): RatePolicy {
  return {
    limit: limit.per_minute,
    periodMs: MINUTE_MS,
    window: limit.per_day === undefined || limit.per_day === 0 ? undefined : { limit: limit.per_day, ms: DAY_MS },
  };
}

/** The headers every /v1/chat/completions response to an identified caller carries. */
export function rateLimitHeaders(decision: RateDecision): Record<string, string> {
  const headers: Record<string, string> = {
    "x-ratelimit-limit-requests": String(decision.limit),
    "x-ratelimit-remaining-requests": String(decision.remaining),
    "x-ratelimit-reset-requests": formatDuration(decision.resetMs),
  };
  if (!decision.allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
  return headers;
}

/** The token dimension's headers (tokens per minute), OpenAI's names. */
export function tokenLimitHeaders(decision: RateDecision, headers: Record<string, string>): void {
  headers["x-ratelimit-limit-tokens"] = String(decision.limit);
  headers["x-ratelimit-remaining-tokens"] = String(Math.max(0, decision.remaining));
  headers["x-ratelimit-reset-tokens"] = formatDuration(decision.resetMs);
  if (!decision.allowed) headers["retry-after"] = String(Math.max(1, Math.ceil(decision.retryAfterMs / 1000)));
}

/** OpenAI's duration format: `250ms`, `1s`, `6m0s`, `23h59m12s`. */
export function formatDuration(ms: number): string {
  if (ms <= 0) return "0s";
  if (ms < 1000) return `${Math.ceil(ms)}ms`;
  const total = Math.ceil(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const s = total % 60;
  if (h > 0) return `${h}h${m}m${s}s`;
  if (m > 0) return `${m}m${s}s`;
  return `${s}s`;
}
