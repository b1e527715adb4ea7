/**
 * The chat-completions shapes the translators read and write, as far as they use them, and the
 * small helpers they share. The upstream's JSON is untrusted: readers narrow every field they take
 * (a missing or mistyped field counts as absent), so a translator never throws on a strange answer.
 *
 * Reasoning: upstreams that separate it send `reasoning_content` (vLLM before 0.10, llama.cpp,
 * DeepSeek, SGLang) or `reasoning` (vLLM since 0.10, Ollama, OpenRouter); both are read.
 */

export interface ChatToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool";
  content?: string | ChatContentPart[] | null;
  tool_calls?: ChatToolCall[];
  tool_call_id?: string;
  reasoning_content?: string;
}

export type ChatContentPart = { type: "text"; text: string } | { type: "image_url"; image_url: { url: string; detail?: string } };

export interface ChatTool {
  type: "function";
  function: { name: string; description?: string; parameters?: unknown; strict?: boolean };
}

export type ChatToolChoice = "auto" | "none" | "required" | { type: "function"; function: { name: string } };

/** A chat.completions request as the translators build it; the pipeline may add fields (stream_options). */
export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  [field: string]: unknown;
}

/** The usage a chat answer reports, narrowed: counts are whole numbers of at least 0, or absent. */
export interface ChatUsage {
  prompt: number;
  completion: number;
  cached: number;
  reasoning: number;
}

/** A parsed chat.completion or chat.completion.chunk, untrusted: every field may be missing or mistyped. */
export type ChatJson = Record<string, unknown>;

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : 0;
}

/** The usage of a chat answer or chunk, or null when it reports none. */
export function readChatUsage(answer: ChatJson): ChatUsage | null {
  const usage = answer.usage;
  if (!isRecord(usage)) return null;
  const prompt = isRecord(usage.prompt_tokens_details) ? usage.prompt_tokens_details : null;
  const completion = isRecord(usage.completion_tokens_details) ? usage.completion_tokens_details : null;
  return {
    prompt: count(usage.prompt_tokens),
    completion: count(usage.completion_tokens),
    cached: count(prompt?.cached_tokens),
    reasoning: count(completion?.reasoning_tokens),
  };
}

/** The first choice of a chat answer or chunk, or null. */
export function firstChoice(answer: ChatJson): Record<string, unknown> | null {
  const choices = answer.choices;
  return Array.isArray(choices) && isRecord(choices[0]) ? choices[0] : null;
}

export function stringField(record: Record<string, unknown> | null, key: string): string {
  const value = record?.[key];
  return typeof value === "string" ? value : "";
}

/** The reasoning text of a message or delta, under either name upstreams use. */
export function reasoningOf(message: Record<string, unknown> | null): string {
  return stringField(message, "reasoning_content") || stringField(message, "reasoning");
}

/**
 * The stop sequence that ended the answer, when the upstream names it: vLLM's choice carries the
 * matched string as `stop_reason`, SGLang's as `matched_stop`. It counts only when it is one the
 * client asked for (vLLM also puts a stop token id there).
 */
export function matchedStopSequence(choice: Record<string, unknown> | null, stopSequences: readonly string[]): string | null {
  if (!choice || stopSequences.length === 0) return null;
  for (const key of ["stop_reason", "matched_stop"]) {
    const value = choice[key];
    if (typeof value === "string" && stopSequences.includes(value)) return value;
  }
  return null;
}

/** The tool calls of a chat message, narrowed; a call without a name is left out. */
export function readToolCalls(message: Record<string, unknown> | null): ChatToolCall[] {
  const calls = message?.tool_calls;
  if (!Array.isArray(calls)) return [];
  const out: ChatToolCall[] = [];
  for (const call of calls) {
    const fn = isRecord(call) && isRecord(call.function) ? call.function : null;
    const name = stringField(fn, "name");
    if (!name) continue;
    out.push({ id: stringField(call, "id") || `call_${out.length}`, type: "function", function: { name, arguments: stringField(fn, "arguments") } });
  }
  return out;
}

/** The id part of an upstream's chat id (`chatcmpl-abc` -> `abc`), for ids in another API's style. */
export function idSuffix(answer: ChatJson): string {
  const id = typeof answer.id === "string" && answer.id ? answer.id : crypto.randomUUID().replaceAll("-", "");
  return id.replace(/^chatcmpl-/, "");
}

/**
 * A request that cannot be translated, with the path of the offending field. Thrown inside a
 * translator and caught at its entry, which returns it as a value (a 400 in the endpoint's shape).
 */
export class UntranslatableError extends Error {
  override name = "UntranslatableError";
  constructor(
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

/** Refuses a request field that cannot be translated: the message names it, and so does the error's `param`. */
export function failParam(param: string, message: string): never {
  throw new UntranslatableError(`${param}: ${message}`, param);
}
