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

/**
 * The `usage` object of a non-streamed completion body, if it has one. Upstreams put it last and
 * flat, so the object after the last `"usage"` is parsed alone; anything else parses the body.
 */
export function usageFromJson(text: string): Usage | null {
  const at = text.lastIndexOf('"usage"');
  if (at === -1) return null;
  const open = text.indexOf("{", at);
  const close = open === -1 ? -1 : text.indexOf("}", open);
  if (close !== -1 && !text.slice(at + 7, open).trim().replace(":", "")) {
    try {
      const usage = JSON.parse(text.slice(open, close + 1)) as Usage;
      if (typeof usage.prompt_tokens === "number" || typeof usage.completion_tokens === "number") return usage;
    } catch {}
  }
  try {
    const parsed = JSON.parse(text) as { usage?: Usage | null };
    return parsed.usage && typeof parsed.usage === "object" ? parsed.usage : null;
  } catch {
    return null;
  }
}
