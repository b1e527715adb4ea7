/**
 * Orders a route's targets for one request according to its strategy, leaving out targets whose
 * circuit is open. The first entry is tried first; the rest are failover candidates.
 *  - failover: configuration order.
 *  - weighted: the first pick follows the weights (random without replacement); weight-0 targets
 *    are never picked first and come last, as pure fallbacks.
 *  - least-latency: lowest moving average of the target's time to first byte first (this model
 *    on that upstream: another model there may be far faster); unmeasured targets lead, so every
 *    target gets measured.
 */
import type { ModelRoute, Target } from "./registry";
import { targetAvailable } from "./target-state";

export function orderTargets(route: ModelRoute, now: number, random: () => number = Math.random): Target[] {
  const targets = route.targets;
  if (targets.length === 1) return targetAvailable(targets[0], now) ? targets : [];
  const available = targets.filter((t) => targetAvailable(t, now));
  if (route.strategy === "weighted") return weightedOrder(available, random);
  if (route.strategy === "least-latency") {
    return available.sort((a, b) => (a.ttfbEwmaMs ?? -1) - (b.ttfbEwmaMs ?? -1));
  }
  return available;
}

function weightedOrder(targets: Target[], random: () => number): Target[] {
  const pool = targets.filter((t) => t.weight > 0);
  const order: Target[] = [];
  while (pool.length > 0) {
    let total = 0;
    for (const t of pool) total += t.weight;
    let pick = random() * total;
    let index = 0;
    while (index < pool.length - 1 && pick >= pool[index].weight) {
      pick -= pool[index].weight;
      index += 1;
    }
    order.push(pool.splice(index, 1)[0]);
  }
  for (const t of targets) if (t.weight === 0) order.push(t);
  return order;
}
