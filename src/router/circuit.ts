/**
 * The circuit breaker that upstreams and route targets each have (./target-state.ts decides which
 * one a failure counts against). A circuit that fails `cooldown_failures` times in a row is skipped
 * until its cooldown ends; then exactly one request probes it (half-open), a success readmits it
 * and a failure opens it again for another cooldown. Time comes from the caller, so tests never
 * sleep.
 */
export type CircuitState = "closed" | "open" | "half-open";

/**
 * A circuit breaker's state: each upstream has one (it cannot be reached), and each route target
 * has its own (the upstream answers that model with 429 or 5xx: ./target-state.ts).
 */
export interface Circuit {
  consecutiveFailures: number;
  cooldownUntil: number;
  /** A half-open probe is in flight; no other request may use this upstream until it ends. */
  probing: boolean;
  /** Times the circuit opened, since start. */
  opened: number;
}

export function closedCircuit(): Circuit {
  return { consecutiveFailures: 0, cooldownUntil: 0, probing: false, opened: 0 };
}

/** When a circuit opens and for how long (the `[routing]` keys). */
export type CircuitPolicy = { cooldown_failures: number; cooldown_ms: number };

export function circuitState(c: Circuit, now: number): CircuitState {
  if (c.cooldownUntil === 0) return "closed";
  return now < c.cooldownUntil ? "open" : "half-open";
}

/** May a request go through this circuit now? Half-open admits one probe at a time. */
export function isAvailable(c: Circuit, now: number): boolean {
  const state = circuitState(c, now);
  if (state === "closed") return true;
  if (state === "open") return false;
  return !c.probing;
}

/** Marks the start of an attempt; a half-open circuit becomes "probing" until the attempt ends. */
export function beginAttempt(c: Circuit, now: number): void {
  if (c.cooldownUntil !== 0 && now >= c.cooldownUntil) c.probing = true;
}

/** An attempt ended without a verdict (the client went away): release a probe, count nothing. */
export function abandonAttempt(c: Circuit): void {
  c.probing = false;
}

/** An answer came through it: an open circuit closes and a probe ends; the run of failures stays. */
export function closeCircuit(c: Circuit): void {
  c.cooldownUntil = 0;
  c.probing = false;
}

/** One more failure in a row: the circuit opens at the threshold, and a failed probe re-opens it at once. */
export function countFailure(c: Circuit, now: number, policy: CircuitPolicy): void {
  c.consecutiveFailures += 1;
  c.probing = false;
  if (c.consecutiveFailures >= policy.cooldown_failures || c.cooldownUntil !== 0) {
    if (c.cooldownUntil === 0 || now >= c.cooldownUntil) c.opened += 1;
    c.cooldownUntil = now + policy.cooldown_ms;
  }
}
