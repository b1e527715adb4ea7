/**
 * The most a chat request can cost before it runs: price x (prompt estimate + completion bound),
 * in integer micro-credits (prices are credits per 1M tokens, so micro-credits per token). The
 * prompt estimate is the request body's size / 4 (Content-Length when sent, so the hot path never
 * re-serialises the body), which over-counts JSON punctuation and so errs towards reserving more.
 * The completion bound is max_tokens, else routing.default_max_tokens.
 */
import { estimateTokens } from "../router/usage";

export interface CostInput {
  price: { prompt: number; completion: number };
  body: { max_tokens?: number; messages: unknown[] };
  request: Request;
  defaultMaxTokens: number;
}

export function promptTokenEstimate(request: Request, messages: unknown[]): number {
  const declared = Number(request.headers.get("content-length"));
  if (Number.isFinite(declared) && declared > 0) return Math.ceil(declared / 4);
  return estimateTokens(JSON.stringify(messages));
}

export function maxCostMicro(input: CostInput): number {
  const { price, body } = input;
  if (price.prompt === 0 && price.completion === 0) return 0;
  const completion = Number.isInteger(body.max_tokens) && body.max_tokens! > 0 ? body.max_tokens! : input.defaultMaxTokens;
  return Math.ceil(promptTokenEstimate(input.request, body.messages) * price.prompt + completion * price.completion);
}
