/**
 * A route target's health: two circuits (./circuit.ts) decide whether a request may use it.
 * The upstream's own opens when the upstream cannot be reached or breaks its answers (connection
 * errors, connect timeouts, broken streams, a wrong key or base_url) and stops every model on it.
 * The target's opens when the upstream answers this model with 429 or 5xx, or not within the
 * first-byte timeout: Ollama out of memory for one large model, a provider's per-model rate limit,
 * or long generations on a busy box, then stop that model only, and the upstream's other models
 * go on being served.
 */
import type { Target } from "./registry";
import { abandonAttempt, beginAttempt, circuitState, closeCircuit, countFailure, isAvailable, type CircuitPolicy, type CircuitState } from "./circuit";
import { nextTtfbAverage, noteFailure, recordAnswered, recordComplete, recordFailure } from "./upstream-health";

export function targetAvailable(t: Target, now: number): boolean {
  return isAvailable(t.upstream, now) && isAvailable(t.circuit, now);
}

/** The upstream's state while it is not closed, else the target's own. */
export function targetState(t: Target, now: number): CircuitState {
  const upstream = circuitState(t.upstream, now);
  return upstream === "closed" ? circuitState(t.circuit, now) : upstream;
}

/** When a target skipped now may be tried again (epoch ms; `now` when it is not cooling down). */
export function targetCoolsUntil(t: Target, now: number): number {
  return Math.max(t.upstream.cooldownUntil, t.circuit.cooldownUntil, now);
}

export function beginTargetAttempt(t: Target, now: number): void {
  beginAttempt(t.upstream, now);
  beginAttempt(t.circuit, now);
}

/** The attempt ended without a verdict (the client went away): probes released, nothing counted. */
export function abandonTargetAttempt(t: Target): void {
  abandonAttempt(t.upstream);
  abandonAttempt(t.circuit);
}

/** An answer that is the answer (2xx, or a 4xx refusal of the request): both circuits close. */
export function recordTargetAnswered(t: Target, ttfbMs: number): void {
  recordAnswered(t.upstream, ttfbMs);
  closeCircuit(t.circuit);
  t.ttfbEwmaMs = nextTtfbAverage(t.ttfbEwmaMs, ttfbMs);
}

/** The upstream answered this model with 429 or 5xx: it is reachable, the model is not served. */
export function recordTargetRefusal(t: Target, now: number, reason: string, policy: CircuitPolicy): void {
  closeCircuit(t.upstream);
  noteFailure(t.upstream, now, reason);
  countFailure(t.circuit, now, policy);
}

/**
 * The upstream took the connection but did not answer this model in time: the target's circuit
 * counts it. The upstream's own circuit is left as it is, but for the probe it may have let
 * through, which ends: no answer proves the upstream well (a hung server that opened it stays open).
 */
export function recordTargetSlow(t: Target, now: number, reason: string, policy: CircuitPolicy): void {
  abandonAttempt(t.upstream);
  noteFailure(t.upstream, now, reason);
  countFailure(t.circuit, now, policy);
}

/** The upstream could not be reached, or broke its answer: its circuit counts it. */
export function recordTargetFailure(t: Target, now: number, reason: string, policy: CircuitPolicy): void {
  recordFailure(t.upstream, now, reason, policy);
  t.circuit.probing = false;
}

/** The answer arrived whole: both runs of failures end. */
export function recordTargetComplete(t: Target, now: number): void {
  recordComplete(t.upstream, now);
  t.circuit.consecutiveFailures = 0;
}
