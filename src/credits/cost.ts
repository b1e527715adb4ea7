/**
 * Token usage as upstreams report it, and its cost in integer micro-credits. Prices are credits
 * per 1M tokens, so micro-credits per token equals the price: cost = tokens * price, rounded up,
 * computed exactly (tokensCostMicro).
 * A reported usage is untrusted JSON: readUsage takes it only when both counts are whole numbers
 * of at least 0 (larger than MAX_COUNTED_TOKENS counts as that many), so no cost, hold or log row is
 * ever NaN, Infinity or a string; any other report (a count negative, fractional, not a number or
 * missing) is no report, and the answer is charged an estimate (../router/pipeline.ts). Either way a
 * request is charged at most its reservation (./meter.ts).
 */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Calls charged at `price.request` (endpoints that report no tokens: audio); absent is none. */
  calls?: number;
}

/**
 * The most tokens one request is counted for, prompt and completion each: hundreds of times the
 * largest context window of any model, and small enough that counts times prices (at most
 * 1,000,000 credits per 1M tokens, src/config/schema.ts) stay exact integers. A larger number
 * (a client's max_tokens of 1e308, a broken upstream's usage) counts as this many.
 */
export const MAX_COUNTED_TOKENS = 1_000_000_000;

export function costMicro(usage: Usage | null, price: { prompt: number; completion: number; request?: number }): number {
  if (!usage) return 0;
  const calls = usage.calls ? usage.calls * callCostMicro(price) : 0;
  return tokensCostMicro(usage.prompt_tokens, usage.completion_tokens, price) + calls;
}

/** price.request in micro-credits: exact, as the config allows at most 6 decimals. */
export function callCostMicro(price: { request?: number }): number {
  return Math.round((price.request ?? 0) * 1e6);
}

/**
 * prompt * price.prompt + completion * price.completion, rounded up, without a float's error
 * (100 tokens at 0.07 is 7, where the float product is 7.000000000000001). Prices have at most 6
 * decimals (the config refuses more), so each is a whole part and a count of millionths, and
 * with token counts of at most MAX_COUNTED_TOKENS every product stays an exact integer below 2^53.
 */
export function tokensCostMicro(prompt: number, completion: number, price: { prompt: number; completion: number }): number {
  const promptWhole = Math.floor(price.prompt);
  const completionWhole = Math.floor(price.completion);
  const millionths = prompt * Math.round((price.prompt - promptWhole) * 1e6) + completion * Math.round((price.completion - completionWhole) * 1e6);
  return prompt * promptWhole + completion * completionWhole + Math.ceil(millionths / 1e6);
}

/** A token count from an untrusted value: a whole number of at least 0, at most MAX_COUNTED_TOKENS; else null. */
function tokenCount(value: unknown): number | null {
  return Number.isInteger(value) && (value as number) >= 0 ? Math.min(value as number, MAX_COUNTED_TOKENS) : null;
}

/** A reported `usage` object as token counts; null unless both counts are whole numbers of at least 0. */
export function readUsage(raw: unknown): Usage | null {
  if (typeof raw !== "object" || raw === null) return null;
  const { prompt_tokens, completion_tokens } = raw as Record<string, unknown>;
  const prompt = tokenCount(prompt_tokens);
  const completion = tokenCount(completion_tokens);
  return prompt === null || completion === null ? null : { prompt_tokens: prompt, completion_tokens: completion };
}

/**
 * The top-level `usage` object of a non-streamed completion body, if it has one. Upstreams put it
 * last and flat, so the object after the last `"usage"` is parsed alone when the body closes right
 * after it (it is the body's own, not a `usage` key nested in a message); anything else parses
 * the body. `read` narrows the object found (readUsage: a completion's two counts).
 */
export function usageFromJson(text: string, read: (raw: unknown) => Usage | null = readUsage): Usage | null {
  const at = text.lastIndexOf('"usage"');
  if (at === -1) return null;
  const open = text.indexOf("{", at);
  const close = open === -1 ? -1 : text.indexOf("}", open);
  if (
    close !== -1 &&
    !text
      .slice(at + 7, open)
      .trim()
      .replace(":", "") &&
    closesTopLevel(text, close + 1)
  ) {
    try {
      const usage = read(JSON.parse(text.slice(open, close + 1)));
      if (usage) return usage;
    } catch {}
  }
  try {
    return read((JSON.parse(text) as { usage?: unknown } | null)?.usage);
  } catch {
    return null;
  }
}

/**
 * Whether `text` from `from` on closes exactly one object and nothing more: what follows a value
 * of the top-level object (other keys, whose strings may hold brackets, then its `}`).
 */
function closesTopLevel(text: string, from: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92)
        i++; // a backslash escapes the next character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) depth++;
    else if (c === 125 || c === 93) {
      if (--depth < -1) return false;
    } else if (depth === -1 && c > 32) return false;
  }
  return depth === -1;
}
