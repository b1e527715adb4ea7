/**
 * Keeps a singleton's lease (./lease.ts) for as long as a process runs the work: takes or renews
 * it now and every ttl/3, so a holder renews twice before its lease could expire, and gives it up
 * on stop. A renewal the database refuses, or one that has not answered within the ttl, counts as
 * not holding: two processes may both skip a turn, but never both run one.
 */
import type { Lease } from "./lease";

export interface LeaseKeeper {
  /** Whether the last take or renewal succeeded. */
  holds(): boolean;
  /** Takes or renews the lease now; resolves to holds(). */
  renew(): Promise<boolean>;
  /** Stops renewing and releases the lease if held. */
  stop(): Promise<void>;
}

export function keepLease(lease: Lease, options: { ttlMs: number; now: () => number }): LeaseKeeper {
  /** Held until then: the lease taken at a time no later than the ask, for ttlMs. */
  let heldUntil = 0;
  let stopped = false;
  const holds = (): boolean => !stopped && options.now() < heldUntil;
  const renew = async (): Promise<boolean> => {
    if (stopped) return false;
    const asked = options.now();
    heldUntil = (await lease.acquire().catch(() => false)) ? asked + options.ttlMs : 0;
    return holds();
  };
  const timer = setInterval(() => void renew(), Math.max(1, Math.floor(options.ttlMs / 3)));
  timer.unref?.();
  void renew();
  return {
    holds,
    renew,
    async stop() {
      const held = holds();
      stopped = true;
      clearInterval(timer);
      if (held) await lease.release().catch(() => {});
    },
  };
}
