/**
 * The event side of the SSE relay (./sse.ts): how an event's data is read, what marks chat
 * completions' events (usage, a finish, `[DONE]`, the gateway's error ending), the StreamDialect
 * another API's stream is read by, and the StreamRewrite a translating endpoint hands the relay.
 * Pure text functions: the relay loop owns the reading, timing and settling.
 */
import type { Usage } from "../credits/cost";

/**
 * An API's own event stream where it is not chat completions' (a native /v1/responses): how the
 * relay reads its usage and its end, and how it ends it when it breaks. Such a stream gets no
 * `[DONE]`, which is chat's alone.
 */
export interface StreamDialect {
  /** Matches an event (its text) that says the answer ended. */
  readonly finished: RegExp;
  /** The usage in an event's data (one that names a usage object), or null; `before` is the stream's so far (an API may report it in parts). */
  usage(data: Record<string, unknown>, before: Usage | null): Usage | null;
  /** The event a stream that broke ends with, in the API's shape. */
  failure(message: string): string;
}

/**
 * How a translating endpoint rewrites a stream for its client, inside the relay's own pull (no
 * stream after the relay's): the complete events as the relay sends them, its own endings included.
 */
export interface StreamRewrite {
  /** The client's text for complete events; "" sends nothing and reads on. */
  events(text: string): string;
  /** Sent as the stream opens, so the client's first byte does not wait for the model's. */
  readonly opening?: string;
  /**
   * Sent while the relay has waited `everyMs` on a silent upstream, and again after each such
   * silence (never while the client is slow to read, nor once the stream ended).
   */
  readonly keepalive?: { readonly everyMs: number; event(): string };
}

export const USAGE_PATTERN = /"usage"\s*:\s*\{/;
export const DONE_TEXT = "data: [DONE]\n\n";
/** An event whose data is `[DONE]` (with or without the optional space, after other fields or not). */
export const DONE = /(?:^|\n)data: ?\[DONE\][ \t]*(?:\n|$)/;
/** A choice's finish_reason that is set (a string, not null): the model finished that choice. */
export const FINISHED = /"finish_reason"\s*:\s*"/;

/** An event's data: its `data:` lines joined by line breaks, as the SSE format says; null when it has none. */
function eventData(event: string): string | null {
  let data: string | null = null;
  let start = 0;
  while (start < event.length) {
    let end = event.indexOf("\n", start);
    if (end === -1) end = event.length;
    if (event.startsWith("data:", start)) {
      const value = event.slice(event.charCodeAt(start + 5) === 32 ? start + 6 : start + 5, end);
      data = data === null ? value : `${data}\n${value}`;
    }
    start = end + 1;
  }
  return data;
}

/** The JSON object of an event's data, or null (no data, not JSON, not an object). */
export function parseData(event: string): Record<string, unknown> | null {
  const data = eventData(event);
  if (data === null) return null;
  try {
    const parsed: unknown = JSON.parse(data);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

/** `translate` of each complete event's data in `text`, trimmed (events without data skipped), joined. */
export function mapEventData(text: string, translate: (data: string) => string): string {
  let out = "";
  let start = 0;
  for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n", start)) {
    const data = eventData(text.slice(start, end));
    if (data !== null) out += translate(data.trim());
    start = end + 2;
  }
  return out;
}

/** The gateway's error event in OpenAI's shape, with which it ends a chat stream that broke. */
export function errorEvent(message: string): string {
  const body = { error: { message, type: "api_error", param: null, code: "upstream_error" } };
  return `data: ${JSON.stringify(body)}\n\n`;
}
