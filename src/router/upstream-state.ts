/**
 * Per-upstream health and circuit breaker. A target that fails `cooldown_failures` times in a row
 * is skipped until its cooldown ends; then one request probes it (half-open), and a success
 * readmits it. Time comes from the caller, so tests never sleep.
 */
import type { UpstreamConfig } from "../config/schema";

export type CircuitState = "closed" | "open" | "half-open";

export interface UpstreamState {
  name: string;
  config: UpstreamConfig;
  /** `${base_url}/chat/completions`, computed once. */
  chatUrl: string;
  modelsUrl: string;
  authorization: string | null;
  consecutiveFailures: number;
  cooldownUntil: number;
  probing: boolean;
  lastError: string | null;
  lastSuccessAt: number | null;
  lastFailureAt: number | null;
  /** Exponential moving average of time to first byte, ms (least-latency strategy). */
  ttfbEwmaMs: number | null;
}

export function createUpstreamState(config: UpstreamConfig): UpstreamState {
  const base = config.base_url.replace(/\/+$/, "");
  return {
    name: config.name,
    config,
    chatUrl: `${base}/chat/completions`,
    modelsUrl: `${base}/models`,
    authorization: config.api_key ? `Bearer ${config.api_key}` : null,
    consecutiveFailures: 0,
    cooldownUntil: 0,
    probing: false,
    lastError: null,
    lastSuccessAt: null,
    lastFailureAt: null,
    ttfbEwmaMs: null,
  };
}

export function circuitState(u: UpstreamState, now: number): CircuitState {
  if (u.cooldownUntil === 0) return "closed";
  return now < u.cooldownUntil ? "open" : "half-open";
}

/** May a request go to this upstream now? Half-open admits one probe at a time. */
export function isAvailable(u: UpstreamState, now: number): boolean {
  const state = circuitState(u, now);
  if (state === "closed") return true;
  if (state === "open") return false;
  return !u.probing;
}

export function recordSuccess(u: UpstreamState, now: number, ttfbMs: number): void {
  u.consecutiveFailures = 0;
  u.cooldownUntil = 0;
  u.probing = false;
  u.lastSuccessAt = now;
  u.ttfbEwmaMs = u.ttfbEwmaMs === null ? ttfbMs : u.ttfbEwmaMs * 0.8 + ttfbMs * 0.2;
}

export function recordFailure(
  u: UpstreamState,
  now: number,
  reason: string,
  policy: { cooldown_failures: number; cooldown_ms: number },
): void {
  u.consecutiveFailures += 1;
  u.lastError = reason;
  u.lastFailureAt = now;
  u.probing = false;
  if (u.consecutiveFailures >= policy.cooldown_failures || u.cooldownUntil !== 0) {
    u.cooldownUntil = now + policy.cooldown_ms;
  }
}

export function upstreamHealth(u: UpstreamState, now: number) {
  return {
    name: u.name,
    state: circuitState(u, now),
    healthy: u.consecutiveFailures === 0,
    consecutive_failures: u.consecutiveFailures,
    last_error: u.lastError,
    last_success_at: u.lastSuccessAt,
    last_failure_at: u.lastFailureAt,
    ttfb_ms: u.ttfbEwmaMs === null ? null : Math.round(u.ttfbEwmaMs * 10) / 10,
  };
}
