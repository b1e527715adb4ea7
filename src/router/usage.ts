/**
 * Token usage as upstreams report it, and its cost in integer micro-credits. Prices are credits
 * per 1M tokens, so micro-credits per token equals the price: cost = tokens * price, rounded up.
 */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

export function costMicro(usage: Usage | null, price: { prompt: number; completion: number }): number {
  if (!usage) return 0;
  const prompt = Math.max(0, Math.floor(Number(usage.prompt_tokens) || 0));
  const completion = Math.max(0, Math.floor(Number(usage.completion_tokens) || 0));
  return Math.ceil(prompt * price.prompt + completion * price.completion);
}

/** The `usage` object of a non-streamed completion body, if it has one. */
export function usageFromJson(text: string): Usage | null {
  if (!text.includes('"usage"')) return null;
  try {
    const parsed = JSON.parse(text) as { usage?: Usage | null };
    return parsed.usage && typeof parsed.usage === "object" ? parsed.usage : null;
  } catch {
    return null;
  }
}

/** A rough token count (4 characters a token) for requests the upstream never reported on. */
export function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}
