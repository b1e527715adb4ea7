/**
 * An API key's policy at admission (./gate.ts asks for keys only; ./key-policy.ts compiles it):
 *   - refusal(): client address (403 ip_not_allowed) and model allowlist (403 model_not_allowed),
 *     checked before any limit is counted;
 *   - take(): the ceilings besides the key's own requests per minute: `[limits] user` across all of
 *     one user's keys (requests and tokens), and tokens per minute (the key's own, else
 *     `[limits] api_key.tokens_per_minute`). A token bucket admits while it is not empty and is
 *     charged the usage's tokens when the request ends, so a burst admitted at once can pass a
 *     tokens-per-minute limit by what its requests use, and is then held back until the debt refills;
 *   - budgetLeft(): what the key may still spend in its budget period, for the gate to reserve
 *     within (the smaller of it and the balance wins). Spend = the key's stored debits in the period
 *     (the ledger's key_id, read once per debit batch) + its open holds and queued debits (the meter).
 * Keys without a policy, under a config without those ceilings, pay one property read here.
 */
import type { Config } from "../config/schema";
import type { CreditMeter } from "../credits/meter";
import { GatewayError } from "../errors";
import type { RateLimiter, RatePolicy } from "../ratelimit/types";
import { MINUTE_MS, rateLimitHeaders, tokenLimitHeaders } from "../ratelimit/types";
import type { Usage } from "../router/usage";
import type { VerifiedKey } from "./apikey";
import type { KeyVerifier } from "./key-verifier";
import { budgetPeriod, type BudgetPeriod } from "./key-policy";
import { IdentifiedDenial, type AdmitInput } from "./types";

export interface KeyLimitsDeps {
  config: Config;
  limiter: RateLimiter;
  meter: CreditMeter;
  keys: KeyVerifier;
  now: () => number;
}

/** What take() counted for an admitted request: given back when unserved, charged its tokens when it ends. */
export interface TakenLimits {
  giveBack(): void;
  charge(usage: Usage | null): void;
}

export interface BudgetLeft {
  leftMicro: number;
  spentMicro: number;
  budgetMicro: number;
  period: BudgetPeriod;
  resetsAt: number | null;
}

export interface KeyLimits {
  refusal(input: AdmitInput, key: VerifiedKey): GatewayError | null;
  /** null: nothing beyond the key's own request limit applies. */
  take(key: VerifiedKey, headers: Record<string, string>): TakenLimits | IdentifiedDenial | null;
  budgetLeft(key: VerifiedKey): BudgetLeft | null;
}

export function createKeyLimits(deps: KeyLimitsDeps): KeyLimits {
  const { limiter, config } = deps;
  const userRequests: RatePolicy | null = config.limits.user?.per_minute ? { limit: config.limits.user.per_minute, periodMs: MINUTE_MS } : null;
  const userTokens: RatePolicy | null = config.limits.user?.tokens_per_minute ? { limit: config.limits.user.tokens_per_minute, periodMs: MINUTE_MS } : null;
  const defaultTokens = config.limits.api_key.tokens_per_minute;
  const tokenPolicies = new Map<number, RatePolicy>();
  const tokenPolicy = (perMinute: number): RatePolicy => {
    let policy = tokenPolicies.get(perMinute);
    if (!policy) tokenPolicies.set(perMinute, (policy = { limit: perMinute, periodMs: MINUTE_MS }));
    return policy;
  };

  return {
    refusal(input, key) {
      const policy = key.policy;
      if (policy === null) return null;
      if (policy.allowsAddress && !policy.allowsAddress(input.clientIp())) {
        return new IdentifiedDenial(key.identity, "ip_not_allowed", "This API key may not be used from your address: its policy allows only certain client addresses");
      }
      if (policy.allowsModel && !policy.allowsModel(input.route)) {
        return new IdentifiedDenial(key.identity, "model_not_allowed", `This API key may not use the model "${input.route.id}": its policy allows other models (GET /v1/models with this key lists them)`, { param: "model" });
      }
      return null;
    },

    take(key, headers) {
      const perKey = key.policy?.tokensPerMinute ?? defaultTokens;
      if (perKey === undefined && userRequests === null && userTokens === null) return null;
      const { identity } = key;
      const taken: Array<[string, RatePolicy]> = [];
      const giveBack = (): void => {
        for (const [subject, policy] of taken) limiter.giveBack(subject, policy);
      };
      if (userRequests !== null) {
        const decision = limiter.take(`keys-of-user:${identity.userId}`, userRequests);
        if (!decision.allowed) {
          Object.assign(headers, rateLimitHeaders(decision));
          return new IdentifiedDenial(identity, "rate_limit_exceeded", `Rate limit reached for this account's API keys together: ${decision.limit} requests per minute; retry after ${headers["retry-after"]} s`, { headers });
        }
        taken.push([`keys-of-user:${identity.userId}`, userRequests]);
      }
      const buckets: Array<[string, RatePolicy, string]> = [];
      if (perKey !== undefined) buckets.push([`tokens:${identity.subject}`, tokenPolicy(perKey), "this API key"]);
      if (userTokens !== null) buckets.push([`tokens-of-user:${identity.userId}`, userTokens, "this account's API keys together"]);
      for (const [subject, policy, who] of buckets) {
        const decision = limiter.take(subject, policy);
        tokenLimitHeaders(decision, headers);
        if (!decision.allowed) {
          giveBack();
          return new IdentifiedDenial(identity, "rate_limit_exceeded", `Token rate limit reached for ${who}: ${decision.limit} tokens per minute; retry after ${headers["retry-after"]} s`, { headers });
        }
        taken.push([subject, policy]);
      }
      return {
        giveBack,
        charge(usage) {
          if (usage === null) return;
          // take() counted one token already.
          const used = usage.prompt_tokens + usage.completion_tokens - 1;
          for (const [subject, policy] of buckets) limiter.charge(subject, policy, used);
        },
      };
    },

    budgetLeft(key) {
      const budget = key.policy?.budget;
      if (budget === undefined) return null;
      const period = budgetPeriod(budget.period, deps.now());
      const keyId = key.row.id;
      const spentMicro = deps.keys.readKeySpend(keyId, period.start) + deps.meter.keyOutstanding(keyId);
      return { leftMicro: budget.micro - spentMicro, spentMicro, budgetMicro: budget.micro, period: budget.period, resetsAt: period.resetsAt };
    },
  };
}
