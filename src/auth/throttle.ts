/**
 * Throttles password sign-in (and the other argon2-hashing forms: sign-up, setup) with the same
 * token buckets as the API, in their own limiter: per client address 20 attempts, refilled at 2
 * a minute; per account (the email as typed, normalised, whether or not it exists) 5 attempts,
 * refilled at 1 a minute. Every attempt counts, successful or not, so the limit cannot be raced.
 * An attempt from a browser that has signed in to the account before (a valid device cookie,
 * ./device-cookie.ts) counts against that device, with the account's numbers, instead of the
 * account: guesses made elsewhere cannot lock the owner out.
 */
import { addressSubject } from "../client-address";
import { createMemoryLimiter } from "../ratelimit/memory";
import type { RatePolicy } from "../ratelimit/types";

const PER_ADDRESS: RatePolicy = { limit: 20, periodMs: 10 * 60_000 };
const PER_ACCOUNT: RatePolicy = { limit: 5, periodMs: 5 * 60_000 };

export interface SignInThrottle {
  /**
   * Counts one attempt; null when allowed, else seconds until the next one would be. `device`: the
   * device a valid device cookie for `account` names.
   */
  attempt(input: { address: string; account?: string; device?: string }): number | null;
  close(): void;
}

export function createSignInThrottle(options: { now?: () => number } = {}): SignInThrottle {
  const limiter = createMemoryLimiter({ now: options.now, maxSubjects: 100_000 });
  return {
    attempt({ address, account, device }) {
      const byAddress = limiter.take(`ip:${addressSubject(address)}`, PER_ADDRESS);
      if (!byAddress.allowed) return Math.ceil(byAddress.retryAfterMs / 1000);
      if (account === undefined) return null;
      const subject = device === undefined ? `account:${account.trim().toLowerCase()}` : `device:${device}`;
      const byAccount = limiter.take(subject, PER_ACCOUNT);
      return byAccount.allowed ? null : Math.ceil(byAccount.retryAfterMs / 1000);
    },
    close: () => limiter.close(),
  };
}
