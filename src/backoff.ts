/**
 * Retry delays, one rule for every retry loop in the gateway (job deliveries, settlements, batched
 * writes, failover rounds, discovery): exponential from a first delay, capped, then shortened by up
 * to JITTER of itself at random. The jitter spreads out retries that failed together (an upstream
 * restarting, a chain node down) so they do not come back together; it only shortens, so a
 * configured delay or cap is never exceeded.
 */

/** The largest share of a delay the jitter takes off. */
export const JITTER = 0.2;

export interface Backoff {
  /** The delay after the first failure. */
  firstMs: number;
  /** No delay is longer. */
  maxMs: number;
  /** A number in [0, 1); Math.random unless a test fixes it. */
  random?: () => number;
}

/** The delay before the retry that follows failure number `failures` (1 for the first). */
export function backoffDelay(failures: number, backoff: Backoff): number {
  const doublings = Math.max(0, Math.min(failures - 1, 30));
  const exponential = Math.min(backoff.maxMs, backoff.firstMs * 2 ** doublings);
  return Math.round(exponential * (1 - JITTER * (backoff.random ?? Math.random)()));
}
