/**
 * What the /v1/messages endpoints share: the request checks every Messages body passes (whichever
 * way it goes on), errors in Anthropic's shape (../../translate/anthropic-errors.ts), and the
 * native wire's reading of Anthropic's usage, whole and streamed. Anthropic counts cached prompt
 * tokens apart from input_tokens; the gateway charges them all as prompt.
 */
import { GatewayError } from "../../errors";
import { anthropicError } from "../../translate/anthropic-errors";
import { isRecord } from "../../translate/chat";
import { MAX_COUNTED_TOKENS, usageFromJson, type Usage } from "../../credits/cost";
import type { StreamDialect } from "../sse-events";
import type { CallBody } from "./types";

/** The checks of a Messages body that hold for a native target too (which reads the rest itself). */
export function checkMessagesBody(body: unknown, options: { maxTokens: "required" | "optional" }): asserts body is CallBody {
  if (!isRecord(body)) throw invalid("The request body must be a JSON object", null);
  if (typeof body.model !== "string" || body.model === "") throw invalid("model: a non-empty string is required", "model");
  const max = body.max_tokens;
  if (max === undefined ? options.maxTokens === "required" : !Number.isSafeInteger(max) || (max as number) < 1) {
    throw invalid("max_tokens: an integer of at least 1 is required", "max_tokens");
  }
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw invalid("messages: a non-empty array is required", "messages");
  if (body.stream !== undefined && typeof body.stream !== "boolean") throw invalid("stream: must be a boolean", "stream");
}

export function invalid(message: string, param: string | null): GatewayError {
  return new GatewayError("invalid_request_error", message, { param });
}

/** A gateway error as Anthropic's error body, with the gateway's status and headers (retry-after among them). */
export function renderAnthropicError(error: GatewayError, headers: Record<string, string>): Response {
  const { status, body } = anthropicError(error.status, error.message);
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers, ...error.options.headers } });
}

/**
 * An upstream's refusal (status 400 and up) in Anthropic's shape: an Anthropic error body as it
 * came, an OpenAI-style one (a chat upstream's) by its message, anything else by its start.
 */
export function anthropicErrorText(text: string, status: number): string {
  let message = text.slice(0, 500);
  try {
    const parsed: unknown = JSON.parse(text);
    if (isRecord(parsed) && isRecord(parsed.error)) {
      if (parsed.type === "error" && typeof parsed.error.type === "string") return text;
      if (typeof parsed.error.message === "string") message = parsed.error.message;
    }
  } catch {}
  return JSON.stringify(anthropicError(status, message || `the upstream answered ${status}`).body);
}

function count(value: unknown): number | null {
  return Number.isInteger(value) && (value as number) >= 0 ? Math.min(value as number, MAX_COUNTED_TOKENS) : null;
}

/** Anthropic's prompt count: input_tokens and the cache's writes and reads, when input_tokens is reported. */
function promptCount(usage: Record<string, unknown>): number | null {
  const input = count(usage.input_tokens);
  if (input === null) return null;
  return Math.min(input + (count(usage.cache_creation_input_tokens) ?? 0) + (count(usage.cache_read_input_tokens) ?? 0), MAX_COUNTED_TOKENS);
}

/** A Messages answer's `usage` as the gateway counts it; null unless both counts are whole numbers of at least 0. */
function readAnthropicUsage(raw: unknown): Usage | null {
  if (!isRecord(raw)) return null;
  const prompt = promptCount(raw);
  const completion = count(raw.output_tokens);
  return prompt === null || completion === null ? null : { prompt_tokens: prompt, completion_tokens: completion };
}

export function anthropicUsageFromJson(text: string): Usage | null {
  return usageFromJson(text, readAnthropicUsage);
}

/**
 * A native Messages stream: `message_start` reports the prompt (and a first output count),
 * `message_delta` the output so far (and, from some servers, the input again); a `stop_reason`
 * that is set, or `message_stop`, says the model finished.
 */
export const MESSAGES_EVENTS: StreamDialect = {
  finished: /"stop_reason"\s*:\s*"|"type"\s*:\s*"message_stop"/,
  usage(data, before) {
    const usage = data.type === "message_start" && isRecord(data.message) ? data.message.usage : data.usage;
    if (!isRecord(usage)) return before;
    const prompt = promptCount(usage) ?? before?.prompt_tokens ?? 0;
    const completion = count(usage.output_tokens) ?? before?.completion_tokens ?? 0;
    return { prompt_tokens: prompt, completion_tokens: completion };
  },
  failure(message) {
    return `event: error\ndata: ${JSON.stringify(anthropicError(502, message).body)}\n\n`;
  },
};
