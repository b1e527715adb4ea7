/**
 * Throttles password sign-in (and the other argon2-hashing forms: sign-up, setup) with the same
 * token buckets as the API: per client address 20 attempts, refilled at 2 a minute; per account
 * (the email as typed, normalised, whether or not it exists) 5 attempts, refilled at 1 a minute.
 * Every attempt counts, successful or not, so the limit cannot be raced.
 * An attempt from a browser that has signed in to the account before (a valid device cookie,
 * ./device-cookie.ts) counts against that device, with the account's numbers, instead of the
 * account: guesses made elsewhere cannot lock the owner out.
 * Existing accounts and devices are counted in a limiter of their own: what can fill the other one
 * (addresses, typed emails) is cheap to make up by the hundred thousand, and a flood of it must not
 * push an account's count out of memory and hand its guesser a fresh set of attempts.
 */
import { addressSubject } from "../client-address";
import { createMemoryLimiter } from "../ratelimit/memory";
import type { RatePolicy } from "../ratelimit/types";

const PER_ADDRESS: RatePolicy = { limit: 20, periodMs: 10 * 60_000 };
const PER_ACCOUNT: RatePolicy = { limit: 5, periodMs: 5 * 60_000 };
const MAX_SUBJECTS = 100_000;

export interface SignInThrottle {
  /**
   * Counts one attempt; null when allowed, else seconds until the next one would be. `accountId`:
   * the account `account` names, when it exists; `device`: the device a valid device cookie for
   * it names.
   */
  attempt(input: { address: string; account?: string; accountId?: number; device?: string }): number | null;
  close(): void;
}

export function createSignInThrottle(options: { now?: () => number } = {}): SignInThrottle {
  const made = createMemoryLimiter({ now: options.now, maxSubjects: MAX_SUBJECTS });
  const accounts = createMemoryLimiter({ now: options.now, maxSubjects: MAX_SUBJECTS });
  return {
    attempt({ address, account, accountId, device }) {
      const byAddress = made.take(`ip:${addressSubject(address)}`, PER_ADDRESS);
      if (!byAddress.allowed) return Math.ceil(byAddress.retryAfterMs / 1000);
      if (account === undefined) return null;
      const byAccount =
        device !== undefined
          ? accounts.take(`device:${device}`, PER_ACCOUNT)
          : accountId !== undefined
            ? accounts.take(`user:${accountId}`, PER_ACCOUNT)
            : made.take(`account:${account.trim().toLowerCase()}`, PER_ACCOUNT);
      return byAccount.allowed ? null : Math.ceil(byAccount.retryAfterMs / 1000);
    },
    close: () => {
      made.close();
      accounts.close();
    },
  };
}
