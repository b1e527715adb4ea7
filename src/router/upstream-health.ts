/**
 * An upstream's health as the router counts it and /api/status, /metrics and the dashboard show
 * it: attempts answered, completed and failed, the last error, and time to first byte. Counters
 * live on the UpstreamState itself (no allocation per request); readers read them when asked.
 */
import { closeCircuit, countFailure, circuitState, type CircuitPolicy, type CircuitState } from "./circuit";
import type { UpstreamState } from "./upstream-setup";

/**
 * The upstream answered (status and headers): it is reachable, so an open circuit closes and a
 * probe ends. Whether the answer is whole is known later (recordComplete, or recordFailure when
 * it breaks off), so the run of failures is not ended here: a stream that always breaks after
 * its headers still opens the circuit after cooldown_failures.
 */
export function recordAnswered(u: UpstreamState, ttfbMs: number): void {
  closeCircuit(u);
  u.ttfbEwmaMs = nextTtfbAverage(u.ttfbEwmaMs, ttfbMs);
}

/** A moving average of time to first byte (EWMA, α = 0.2) after one more answer; the first answer starts it. */
export function nextTtfbAverage(average: number | null, ttfbMs: number): number {
  return average === null ? ttfbMs : average * 0.8 + ttfbMs * 0.2;
}

/** The answer arrived whole: a successful attempt, and the end of any run of failures. */
export function recordComplete(u: UpstreamState, now: number): void {
  u.consecutiveFailures = 0;
  u.lastSuccessAt = now;
  u.successes += 1;
}

export function recordFailure(u: UpstreamState, now: number, reason: string, policy: CircuitPolicy): void {
  noteFailure(u, now, reason);
  countFailure(u, now, policy);
}

/** A failed attempt in the upstream's counters and status, whichever circuit it counts against. */
export function noteFailure(u: UpstreamState, now: number, reason: string): void {
  u.failures += 1;
  u.lastError = reason;
  u.lastFailureAt = now;
}

export interface UpstreamHealth {
  name: string;
  state: CircuitState;
  healthy: boolean;
  consecutive_failures: number;
  /** Epoch ms when an open circuit lets a probe through; null when closed. */
  cooldown_until: number | null;
  last_error: string | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  ttfb_ms: number | null;
}

export function upstreamHealth(u: UpstreamState, now: number): UpstreamHealth {
  return {
    name: u.name,
    state: circuitState(u, now),
    healthy: u.consecutiveFailures === 0,
    consecutive_failures: u.consecutiveFailures,
    cooldown_until: u.cooldownUntil === 0 ? null : u.cooldownUntil,
    last_error: u.lastError,
    last_success_at: u.lastSuccessAt,
    last_failure_at: u.lastFailureAt,
    ttfb_ms: u.ttfbEwmaMs === null ? null : Math.round(u.ttfbEwmaMs * 10) / 10,
  };
}
