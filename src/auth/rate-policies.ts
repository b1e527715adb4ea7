/**
 * The rate policy each kind of caller is counted under (`[limits]`): API keys, sessions and
 * anonymous callers each their own, and a key with its own per_minute the API key policy at that
 * rate per minute. A key's policy is made once per rate and kept, so a request allocates none.
 */
import type { Config } from "../config/schema";
import { MINUTE_MS, policyFromLimit, type RatePolicy } from "../ratelimit/types";

export interface RatePolicies {
  api_key: RatePolicy;
  session: RatePolicy;
  anonymous: RatePolicy;
  /** The API key policy at a key's own `perMinute`. */
  forKey(perMinute: number): RatePolicy;
}

export function createRatePolicies(limits: Config["limits"]): RatePolicies {
  const apiKey = policyFromLimit(limits.api_key);
  const keyPolicies = new Map<number, RatePolicy>();
  return {
    api_key: apiKey,
    session: policyFromLimit(limits.session),
    anonymous: policyFromLimit(limits.anonymous),
    forKey(perMinute) {
      let policy = keyPolicies.get(perMinute);
      if (!policy) keyPolicies.set(perMinute, (policy = { ...apiKey, limit: perMinute, periodMs: MINUTE_MS }));
      return policy;
    },
  };
}
