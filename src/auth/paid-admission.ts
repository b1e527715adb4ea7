/**
 * The credit check a request to a paid model passes once the rate limit has let it through
 * (./gate.ts): paused with a 503 while the database has refused debits for more than
 * DEBITS_STALLED_MS; otherwise the balance left after in-flight reservations (and, for an API key
 * with a budget, what the budget leaves) must cover the request's reservation
 * (../credits/reservation.ts), its completion limit cut to what it pays for, else 402. The
 * admission's settle() debits the reported usage's cost, at most the reservation, and returns the
 * promise of its commit. Makes no writes: the balance comes from the caller (a session's row),
 * from memory (./key-verifier.ts), or one read on Postgres.
 */
import type { Config } from "../config/schema";
import type { RateLimiter, RatePolicy } from "../ratelimit/types";
import type { CreditMeter } from "../credits/meter";
import { reserveWithin } from "../credits/reservation";
import { formatCredits } from "../credits/amount";
import { costMicro } from "../credits/cost";
import type { GatewayError } from "../errors";
import { IdentifiedDenial, type Admission, type AdmitInput, type Identity, type SettleInput } from "./types";
import type { KeyVerifier } from "./key-check";
import { budgetExceeded, type KeyLimits, type TakenLimits } from "./key-limits";
import type { VerifiedKey } from "./apikey";

/**
 * How long debits may go unwritten before paid requests are paused: past it a crash would lose
 * more than a moment of usage (nothing bounds a queue the database keeps refusing).
 */
export const DEBITS_STALLED_MS = 10_000;

export interface PaidAdmissionDeps {
  config: Config;
  now: () => number;
  limiter: RateLimiter;
  meter: CreditMeter;
  keys: KeyVerifier;
  keyLimits: KeyLimits;
}

/** A call the rate limit admitted, on its way to a paid model. */
export interface PaidCall {
  input: AdmitInput;
  identity: Identity;
  policy: RatePolicy;
  /** The stored balance when already read (sessions), null to read it here. */
  knownBalance: number | null;
  headers: Record<string, string>;
  taken: TakenLimits | null;
  /** An API key's, whose budget applies (./key-limits.ts). */
  key?: VerifiedKey;
  /** What settle() does whatever the cost: the rate limit's give-back and the key's charge. */
  giveBack: (outcome: SettleInput) => void;
}

export function createPaidAdmission(deps: PaidAdmissionDeps): (call: PaidCall) => Admission | GatewayError | Promise<Admission | GatewayError> {
  const { config, limiter, meter, keys, keyLimits } = deps;

  function admitPaid(call: PaidCall): Admission | GatewayError | Promise<Admission | GatewayError> {
    const { input, identity, policy, knownBalance, headers, taken, key, giveBack } = call;
    const { route } = input;
    const unrecordedSince = meter.unrecordedSince();
    if (unrecordedSince !== null && deps.now() - unrecordedSince > DEBITS_STALLED_MS) {
      limiter.giveBack(identity.subject, policy);
      taken?.giveBack();
      return new IdentifiedDenial(
        identity,
        "service_unavailable",
        "Paid models are paused: the database has refused to record credits for a while (locked by another process, or the disk is full). Free models still work; try again shortly",
        {
          headers: { ...headers, "retry-after": "5" },
        },
      );
    }
    const userId = identity.userId!;
    const storedBalance = knownBalance ?? keys.readBalance(userId);
    // Read from Postgres: admitted again once it is here, so that what is held in flight, and the
    // key's spend (cached by then), are taken in the same turn as the reservation.
    if (typeof storedBalance !== "number") return storedBalance.then((read) => admitPaid({ ...call, knownBalance: read }));
    const available = meter.available(userId, storedBalance);
    const budget = key === undefined ? null : keyLimits.budgetLeft(key);
    if (budget instanceof Promise) return budget.then(() => admitPaid({ ...call, knownBalance: storedBalance }));
    const bound = budget !== null && budget.leftMicro < available ? budget.leftMicro : available;
    const reservation = (input.reserve ?? reserveWithin)({
      price: route.price,
      body: input.body,
      bodyBytes: input.bodyBytes,
      defaultMaxTokens: config.routing.default_max_tokens,
      availableMicro: bound,
    });
    if ("neededMicro" in reservation && budget !== null && bound < available) return budgetExceeded(identity, budget, reservation.neededMicro, headers);
    if ("neededMicro" in reservation) {
      // What is held can pass the balance (a burst's reservations): said as its own amount, not "of it".
      const inFlight =
        available < storedBalance ? `, and requests in flight or spent and not yet recorded hold ${formatCredits(storedBalance - available)}` : "";
      return new IdentifiedDenial(
        identity,
        "insufficient_credits",
        `Your credit balance is ${formatCredits(storedBalance)}${inFlight}; model "${route.id}" is not free, and this request needs at least ${formatCredits(reservation.neededMicro)} (its prompt and a short answer). Ask an administrator for credits`,
        { headers },
      );
    }
    const hold = meter.reserve(userId, reservation.micro, identity.keyId);
    return {
      identity,
      headers,
      reservedMicro: reservation.micro,
      completionLimit: reservation.completionLimit ?? undefined,
      settle: (outcome) => {
        giveBack(outcome);
        return meter.settle(hold, { costMicro: costMicro(outcome.usage, route.price), requestId: input.requestId, model: route.id, at: deps.now() });
      },
    };
  }

  return admitPaid;
}
