/**
 * Admission's request limits when the limiter answers later (a shared store, ../ratelimit/redis.ts,
 * `[cluster] redis_url`). The gate asks the identity's own limit and, for an API key, its ceilings
 * (./key-limits.ts) in the same event-loop turn, so they travel to the store in one round trip;
 * this judges the answers as the in-memory path does in order: the identity's limit first, then
 * the ceilings, giving back whatever was taken for a request that is refused. A store that cannot
 * answer refuses the request (503 with Retry-After): a limit never fails open.
 */
import { GatewayError } from "../errors";
import type { RateDecision } from "../ratelimit/types";
import { limitsUnavailable, rateLimitHeaders } from "../ratelimit/types";
import type { KeyLimits, TakenLimits } from "./key-limits";
import { IdentifiedDenial, type Identity } from "./types";

/** The 429 of an identity's own request limit (per key, per user's sessions, per day for a window). */
export function requestLimitDenial(identity: Identity, decision: RateDecision, headers: Record<string, string>, who: string): IdentifiedDenial {
  const per = decision.binding === "bucket" ? "minute" : "day";
  return new IdentifiedDenial(
    identity,
    "rate_limit_exceeded",
    `Rate limit reached for ${who}: ${decision.limit} requests per ${per}; retry after ${headers["retry-after"]} s`,
    { headers },
  );
}

export interface SharedLimitsInput {
  identity: Identity;
  who: string;
  /** The identity's own limit, asked. */
  decided: Promise<RateDecision>;
  /** The key's ceilings, asked in the same turn (null without a key), and the headers a ceiling's denial is written to. */
  ceilings: ReturnType<KeyLimits["take"]>;
  ceilingHeaders: Record<string, string>;
  /** Returns the request the identity's own limit counted. */
  giveBackOwn: () => void;
}

/** The request's x-ratelimit-* headers and what the ceilings took, or its refusal. */
export async function judgeSharedLimits(input: SharedLimitsInput): Promise<{ headers: Record<string, string>; taken: TakenLimits | null } | GatewayError> {
  const { identity } = input;
  const [decision, taken] = await Promise.all([input.decided, input.ceilings]).catch(() => [null, null] as const);
  if (decision === null) {
    const unavailable = limitsUnavailable();
    return new IdentifiedDenial(identity, unavailable.code, unavailable.message, unavailable.options);
  }
  const headers = rateLimitHeaders(decision);
  if (!decision.allowed) {
    if (taken !== null && !(taken instanceof GatewayError)) taken.giveBack();
    return requestLimitDenial(identity, decision, headers, input.who);
  }
  if (taken instanceof GatewayError) {
    input.giveBackOwn();
    // The ceiling's numbers over the identity's own, as the in-memory path writes them.
    Object.assign(input.ceilingHeaders, { ...headers, ...input.ceilingHeaders });
    return taken;
  }
  return { headers, taken };
}
