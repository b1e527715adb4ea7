/**
 * An API key's policy at admission (./gate.ts asks for keys only; ./key-policy.ts compiles it):
 *   - refusal(): client address (403 ip_not_allowed) and, for a model call (not a read), model
 *     allowlist (403 model_not_allowed), checked before any limit is counted;
 *   - take(): the ceilings besides the key's own requests per minute: `[limits] user` across all of
 *     one user's keys (requests and tokens), and tokens per minute (the key's own, else
 *     `[limits] api_key.tokens_per_minute`). A token bucket admits while it is not empty and is
 *     charged the usage's tokens when the request ends, so a burst admitted at once can pass a
 *     tokens-per-minute limit by what its requests use, and is then held back until the debt
 *     refills. Its x-ratelimit-*-tokens headers go on the 429 only: three more headers on every
 *     answer are a share of the paid path's CPU that the policy's budget (3%, make ab) cannot spare;
 *   - budgetLeft(): what the key may still spend in its budget period, for the gate to reserve
 *     within (the smaller of it and the balance wins). Spend = the key's stored debits in the period
 *     (the ledger's key_id: summed once, then added to as debits are written) + its open holds
 *     and queued debits (the meter). On Postgres a spend not yet cached is read first.
 * Keys without a policy, under a config without those ceilings, pay one property read here.
 */
import type { Config } from "../config/schema";
import type { CreditMeter } from "../credits/meter";
import type { GatewayError } from "../errors";
import type { RateDecision, RateLimiter, RatePolicy } from "../ratelimit/types";
import { decidedNow, MINUTE_MS, rateLimitHeaders, tokenLimitHeaders } from "../ratelimit/types";
import type { ModelRoute } from "../router/registry";
import type { Usage } from "../credits/cost";
import type { VerifiedKey } from "./apikey";
import type { KeyVerifier } from "./key-check";
import { budgetPeriod, type BudgetPeriod } from "./key-policy";
import { IdentifiedDenial, type AdmitInput, type Identity } from "./types";
import { formatCredits } from "../credits/amount";

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

type Limit = { subject: string; policy: RatePolicy; tokens: boolean; who: string };

/**
 * The limits a key's requests count against, in order, and what an admitted request took: all of
 * them, so one TakenLimits per key serves every request (nothing is allocated per request).
 */
interface Plan {
  limits: Limit[];
  taken: TakenLimits;
}

/** Returns the first `count` of `limits` to the limiter. */
function giveBackFirst(limiter: RateLimiter, limits: Limit[], count: number): void {
  for (let i = 0; i < count; i++) limiter.giveBack(limits[i].subject, limits[i].policy);
}

class TakenAll implements TakenLimits {
  constructor(
    private readonly limiter: RateLimiter,
    private readonly limits: Limit[],
  ) {}

  giveBack(): void {
    giveBackFirst(this.limiter, this.limits, this.limits.length);
  }

  charge(usage: Usage | null): void {
    if (usage === null) return;
    // take() counted one token already.
    const used = usage.prompt_tokens + usage.completion_tokens - 1;
    for (const limit of this.limits) if (limit.tokens) this.limiter.charge(limit.subject, limit.policy, used);
  }
}

function denial(identity: VerifiedKey["identity"], limit: Plan["limits"][number], decision: RateDecision, headers: Record<string, string>): IdentifiedDenial {
  if (limit.tokens) tokenLimitHeaders(decision, headers);
  else Object.assign(headers, rateLimitHeaders(decision));
  const what = limit.tokens ? "Token rate limit" : "Rate limit";
  return new IdentifiedDenial(
    identity,
    "rate_limit_exceeded",
    `${what} reached for ${limit.who}: ${decision.limit} ${limit.tokens ? "tokens" : "requests"} per minute; retry after ${headers["retry-after"]} s`,
    { headers },
  );
}

export interface KeyLimits {
  refusal(input: Pick<AdmitInput, "clientIp">, key: VerifiedKey, route: ModelRoute | null): GatewayError | null;
  /**
   * null: nothing beyond the key's own request limit applies. A promise when the limiter is shared
   * (it rejects when the store cannot be asked); a denial's headers are written into `headers`.
   */
  take(key: VerifiedKey, headers: Record<string, string>): TakenLimits | IdentifiedDenial | null | Promise<TakenLimits | IdentifiedDenial>;
  /** A promise when the key's stored spend had to be read (Postgres): ask again once it settles. */
  budgetLeft(key: VerifiedKey): BudgetLeft | null | Promise<void>;
}

export function createKeyLimits(deps: KeyLimitsDeps): KeyLimits {
  const { limiter, config } = deps;
  const userRequests: RatePolicy | null = config.limits.user?.per_minute ? { limit: config.limits.user.per_minute, periodMs: MINUTE_MS } : null;
  const userTokens: RatePolicy | null = config.limits.user?.tokens_per_minute ? { limit: config.limits.user.tokens_per_minute, periodMs: MINUTE_MS } : null;
  const defaultTokens = config.limits.api_key.tokens_per_minute;
  const periods: Partial<Record<BudgetPeriod, { start: number; resetsAt: number | null }>> = {};
  const ceilings = userRequests !== null || userTokens !== null || defaultTokens !== undefined;
  /** Per verified key (the verifier keeps one object per cached key): the limits take() counts, in order. */
  const plans = new WeakMap<VerifiedKey, Plan | null>();
  const planFor = (key: VerifiedKey): Plan | null => {
    const perKey = key.policy?.tokensPerMinute ?? defaultTokens;
    const userId = key.identity.userId;
    const limits: Limit[] = [];
    if (userRequests !== null) limits.push({ subject: `keys-of-user:${userId}`, policy: userRequests, tokens: false, who: "this account's API keys together" });
    if (perKey !== undefined)
      limits.push({ subject: `tokens:${key.identity.subject}`, policy: { limit: perKey, periodMs: MINUTE_MS }, tokens: true, who: "this API key" });
    if (userTokens !== null) limits.push({ subject: `tokens-of-user:${userId}`, policy: userTokens, tokens: true, who: "this account's API keys together" });
    return limits.length === 0 ? null : { limits, taken: new TakenAll(limiter, limits) };
  };

  /**
   * Every limit of the plan asked at once (one round trip to a shared store), then judged in order:
   * when one refuses, those that allowed are given back, as the in-memory path never takes them.
   */
  async function takeShared(
    identity: VerifiedKey["identity"],
    plan: Plan,
    first: Promise<RateDecision>,
    headers: Record<string, string>,
  ): Promise<TakenLimits | IdentifiedDenial> {
    const limits = plan.limits;
    const decisions = await Promise.all([first, ...limits.slice(1).map((limit) => limiter.take(limit.subject, limit.policy))]);
    const refused = decisions.findIndex((decision) => !decision.allowed);
    const giveBack = (): void => {
      for (let i = 0; i < limits.length; i++) if (decisions[i].allowed) limiter.giveBack(limits[i].subject, limits[i].policy);
    };
    if (refused === -1) return plan.taken;
    giveBack();
    return denial(identity, limits[refused], decisions[refused], headers);
  }

  return {
    refusal(input, key, route) {
      const policy = key.policy;
      if (policy === null) return null;
      if (policy.allowsAddress && !policy.allowsAddress(input.clientIp())) {
        return new IdentifiedDenial(
          key.identity,
          "ip_not_allowed",
          "This API key may not be used from your address: its policy allows only certain client addresses",
        );
      }
      if (route !== null && policy.allowsModel && !policy.allowsModel(route)) {
        return new IdentifiedDenial(
          key.identity,
          "model_not_allowed",
          `This API key may not use the model "${route.id}": its policy allows other models (GET /v1/models with this key lists them)`,
          { param: "model" },
        );
      }
      return null;
    },

    take(key, headers) {
      if (!ceilings && key.policy?.tokensPerMinute === undefined) return null;
      let plan = plans.get(key);
      if (plan === undefined) plans.set(key, (plan = planFor(key)));
      if (plan === null) return null;
      const { limits } = plan;
      const first = limiter.take(limits[0].subject, limits[0].policy);
      if (first instanceof Promise) return takeShared(key.identity, plan, first, headers);
      for (let i = 0; i < limits.length; i++) {
        const decision = i === 0 ? first : decidedNow(limiter.take(limits[i].subject, limits[i].policy));
        if (!decision.allowed) {
          giveBackFirst(limiter, limits, i);
          return denial(key.identity, limits[i], decision, headers);
        }
      }
      return plan.taken;
    },

    budgetLeft(key) {
      const budget = key.policy?.budget;
      if (budget === undefined) return null;
      const now = deps.now();
      let period = periods[budget.period];
      // A period's bounds are worked out again only once it has ended (or the clock went back).
      if (period === undefined || now >= (period.resetsAt ?? Infinity) || now < period.start)
        periods[budget.period] = period = budgetPeriod(budget.period, now);
      const keyId = key.row.id;
      const stored = deps.keys.readKeySpend(keyId, period.start);
      // Read from Postgres: the caller asks again once it is cached.
      if (typeof stored !== "number") return stored.then(() => undefined);
      const spentMicro = stored + deps.meter.keyOutstanding(keyId);
      return { leftMicro: budget.micro - spentMicro, spentMicro, budgetMicro: budget.micro, period: budget.period, resetsAt: period.resetsAt };
    },
  };
}

/** The 402 for a request its key's budget cannot cover: the budget, what is spent or held, and when it resets. */
export function budgetExceeded(identity: Identity, budget: BudgetLeft, neededMicro: number, headers: Record<string, string>): IdentifiedDenial {
  const resets = budget.resetsAt === null ? "it is a total budget and does not reset" : `it resets at ${new Date(budget.resetsAt).toISOString()}`;
  const message = `This API key's budget is ${formatCredits(budget.budgetMicro)} credits per ${budget.period}, and ${formatCredits(budget.spentMicro)} of it is spent or held by requests in flight; this request needs at least ${formatCredits(neededMicro)}, and ${resets}`;
  return new IdentifiedDenial(identity, "budget_exceeded", message, {
    headers,
    extra: {
      budget: formatCredits(budget.budgetMicro),
      spent: formatCredits(budget.spentMicro),
      resets_at: budget.resetsAt === null ? null : new Date(budget.resetsAt).toISOString(),
    },
  });
}
