/**
 * The most a chat request can cost before it runs: the one estimate behind both the credit
 * meter's reservation and the amount a SpendAuth signature must cover. It is price x (prompt
 * estimate + completion bound), in integer micro-credits (prices are credits per 1M tokens, so
 * micro-credits per token). The prompt estimate is the request body's size in bytes / 4, which
 * over-counts the JSON around the messages and so errs towards more. The completion bound is the
 * largest of max_completion_tokens, max_tokens and n_predict (an upstream may read any), else
 * routing.default_max_tokens, times `n` (the choices asked for), at most MAX_COUNTED_TOKENS (a
 * bound of 1e308 tokens would make the cost Infinity).
 */
import { MAX_COUNTED_TOKENS, tokensCostMicro } from "./cost";

/** OpenAI's own limit on `n`; a larger one is counted as this many (the upstream refuses it anyway). */
const MAX_CHOICES = 128;

export interface CostInput {
  price: { prompt: number; completion: number; request?: number };
  body: Record<string, unknown>;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  defaultMaxTokens: number;
}

export function maxCostMicro(input: CostInput): number {
  const { price } = input;
  if (price.prompt === 0 && price.completion === 0) return 0;
  return tokensCostMicro(promptTokenEstimate(input.bodyBytes), completionBound(input.body, input.defaultMaxTokens), price);
}

/** A request's prompt tokens before any upstream reported them: its body's bytes / 4. */
export function promptTokenEstimate(bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4);
}

/** The most completion tokens a request may be answered with, all choices together: what its reservation is for. */
export function completionBound(body: Record<string, unknown>, fallback: number): number {
  return Math.min(completionLimit(body, fallback) * choicesAsked(body), MAX_COUNTED_TOKENS);
}

/** The choices a request asks for (`n`), 1 to MAX_CHOICES. */
export function choicesAsked(body: Record<string, unknown>): number {
  return Math.min(Math.max(1, positive(body.n)), MAX_CHOICES);
}

/**
 * The most completion tokens of one choice: the largest limit the request sets in any field an
 * upstream may read (max_completion_tokens, max_tokens, llama.cpp's n_predict), else `fallback`.
 */
export function completionLimit(body: Record<string, unknown>, fallback: number): number {
  const asked = Math.max(positive(body.max_completion_tokens), positive(body.max_tokens), positive(body.n_predict));
  return asked > 0 ? asked : fallback;
}

/** A positive finite number rounded up, else 0. */
function positive(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? Math.min(Math.ceil(value), MAX_COUNTED_TOKENS) : 0;
}
