/**
 * How much of an available amount a paid request may hold, decided before it runs: the one piece
 * behind the credit check (balance minus what is held) and any other limit reserved the same way.
 * A request is reserved its maximum cost (./price.ts) when the amount covers it. When it does not,
 * its completion is cut to what the amount pays for after the prompt estimate: the upstream is
 * sent that lower limit (per choice), and the reservation is the cost of that. A request is
 * refused when the amount does not cover its prompt estimate and MIN_COMPLETION_TOKENS per choice
 * (or its own smaller limit), or is not positive. So a reservation never exceeds the amount it was
 * made from, and since a request is never charged more than its reservation (./meter.ts), the
 * client's numbers cannot take a balance below zero.
 *
 *   reserveWithin({ price, body, bodyBytes, defaultMaxTokens, availableMicro })
 *     -> { micro, completionLimit }   completionLimit: per choice, null when the request's own is covered
 *     -> { neededMicro }              the least it would need: refuse it
 */
import { MAX_COUNTED_TOKENS, tokensCostMicro } from "./cost";
import { choicesAsked, completionLimit, promptTokenEstimate, type CostInput } from "./price";

/** The fewest completion tokens per choice a request cut to its balance is still sent upstream. */
export const MIN_COMPLETION_TOKENS = 16;

export interface Reservation {
  /** Micro-credits to hold: the most the request may be charged. */
  micro: number;
  /** The completion limit per choice to send upstream in place of the request's own; null when its own is covered. */
  completionLimit: number | null;
}

export type ReserveInput = CostInput & { availableMicro: number };

/** How a request's reservation is made from an available amount (reserveWithin for chat; an endpoint may have its own). */
export type Reserve = (input: ReserveInput) => Reservation | { neededMicro: number };

export function reserveWithin(input: ReserveInput): Reservation | { neededMicro: number } {
  const { price, body, availableMicro } = input;
  const prompt = promptTokenEstimate(input.bodyBytes);
  const choices = choicesAsked(body);
  const asked = completionLimit(body, input.defaultMaxTokens);
  const least = Math.min(asked, MIN_COMPLETION_TOKENS);
  const cost = (perChoice: number): number => tokensCostMicro(prompt, Math.min(perChoice * choices, MAX_COUNTED_TOKENS), price);
  // At least one micro-credit: a model that is not free is never served on a balance of zero or less.
  const needed = Math.max(1, cost(least));
  if (needed > availableMicro) return { neededMicro: needed };
  const full = cost(asked);
  if (full <= availableMicro) return { micro: full, completionLimit: null };
  // Past here completions are priced (else `full` would equal `needed`). The quotient is what the
  // amount left after the prompt pays for; the loop only mends a float's error.
  let perChoice = Math.max(least, Math.min(asked - 1, Math.floor((availableMicro - cost(0)) / price.completion / choices)));
  while (cost(perChoice) > availableMicro) perChoice -= 1;
  return { micro: cost(perChoice), completionLimit: perChoice };
}

/**
 * The reservation of a request whose cost is known before it runs (a price per call, a prompt
 * alone): all of it, or a refusal when the amount does not cover it; at least one micro-credit,
 * as reserveWithin asks.
 */
export function reserveFixed(costMicro: number, availableMicro: number): Reservation | { neededMicro: number } {
  const needed = Math.max(1, costMicro);
  return needed > availableMicro ? { neededMicro: needed } : { micro: costMicro, completionLimit: null };
}

/** The most a request may cost: its reservation from an unlimited amount (what a SpendAuth amount must cover). */
export function maxReservation(reserve: Reserve, input: CostInput): number {
  const reservation = reserve({ ...input, availableMicro: Infinity });
  return "micro" in reservation ? reservation.micro : 0;
}
