/**
 * The most a chat request can cost before it runs: the one estimate behind both the credit
 * meter's reservation and the amount a SpendAuth signature must cover. It is price x (prompt
 * estimate + completion bound), in integer micro-credits (prices are credits per 1M tokens, so
 * micro-credits per token). The prompt estimate is the request body's size in bytes / 4, which
 * over-counts the JSON around the messages and so errs towards more. The completion bound is
 * max_completion_tokens, else max_tokens, else routing.default_max_tokens, at most
 * MAX_COUNTED_TOKENS (a bound of 1e308 tokens would make the cost Infinity).
 */
import { MAX_COUNTED_TOKENS } from "../router/usage";

export interface CostInput {
  price: { prompt: number; completion: number };
  body: Record<string, unknown>;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  defaultMaxTokens: number;
}

export function maxCostMicro(input: CostInput): number {
  const { price } = input;
  if (price.prompt === 0 && price.completion === 0) return 0;
  return Math.ceil(promptTokenEstimate(input.bodyBytes) * price.prompt + completionBound(input.body, input.defaultMaxTokens) * price.completion);
}

/** A request's prompt tokens before any upstream reported them: its body's bytes / 4. */
export function promptTokenEstimate(bodyBytes: number): number {
  return Math.ceil(bodyBytes / 4);
}

function completionBound(body: Record<string, unknown>, fallback: number): number {
  const value = body.max_completion_tokens ?? body.max_tokens;
  return typeof value === "number" && Number.isFinite(value) && value > 0 ? Math.min(Math.ceil(value), MAX_COUNTED_TOKENS) : fallback;
}
