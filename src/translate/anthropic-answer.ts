/**
 * A chat.completion answer rewritten as an Anthropic Messages answer (`type: "message"`).
 *
 *   chatToMessage(chatCompletion, { model, stopSequences?, id? }) -> AnthropicMessage
 *
 * Content comes in Anthropic's order: a `thinking` block (from the upstream's reasoning, with an
 * empty signature: no upstream signs it), then the text, then one `tool_use` block per tool call.
 * An OpenAI-style `refusal` is text too, with stop reason `refusal`.
 * A tool call's arguments that are not a JSON object give `input: {}` (Anthropic's input is
 * always an object). `model` is the route the client asked for, not the upstream's name.
 * Stop reasons: stop -> end_turn (stop_sequence when the upstream names the sequence it matched,
 * see ./chat.ts), length -> max_tokens, tool_calls -> tool_use, content_filter -> refusal.
 * Usage: Anthropic's input_tokens exclude cache reads, so cached prompt tokens are moved to
 * cache_read_input_tokens.
 */
import {
  firstChoice,
  idSuffix,
  isRecord,
  matchedStopSequence,
  readChatUsage,
  readToolCalls,
  reasoningOf,
  stringField,
  type ChatJson,
  type ChatUsage,
} from "./chat";

export type AnthropicStopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal";

type AnthropicContentBlock =
  | { type: "text"; text: string }
  | { type: "thinking"; thinking: string; signature: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> };

export interface AnthropicUsage {
  input_tokens: number;
  output_tokens: number;
  cache_read_input_tokens?: number;
}

export interface AnthropicMessage {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: AnthropicContentBlock[];
  stop_reason: AnthropicStopReason;
  stop_sequence: string | null;
  usage: AnthropicUsage;
}

export interface AnswerOptions {
  /** The model the client named. */
  model: string;
  /** The request's stop_sequences, to tell stop_sequence from end_turn. */
  stopSequences?: readonly string[];
  /** The message id; by default `msg_` and the upstream's id. */
  id?: string;
}

export function chatToMessage(answer: ChatJson, options: AnswerOptions): AnthropicMessage {
  const choice = firstChoice(answer);
  const message = isRecord(choice?.message) ? choice.message : null;
  const content: AnthropicContentBlock[] = [];
  const reasoning = reasoningOf(message);
  if (reasoning) content.push({ type: "thinking", thinking: reasoning, signature: "" });
  const text = stringField(message, "content") + stringField(message, "refusal");
  if (text) content.push({ type: "text", text });
  for (const call of readToolCalls(message)) {
    content.push({ type: "tool_use", id: call.id, name: call.function.name, input: parseInput(call.function.arguments) });
  }
  const stopSequence = matchedStopSequence(choice, options.stopSequences ?? []);
  return {
    id: options.id ?? `msg_${idSuffix(answer)}`,
    type: "message",
    role: "assistant",
    model: options.model,
    content,
    stop_reason: stringField(message, "refusal") ? "refusal" : stopReason(stringField(choice, "finish_reason"), stopSequence),
    stop_sequence: stopSequence,
    usage: anthropicUsage(readChatUsage(answer)),
  };
}

export function stopReason(finishReason: string, stopSequence: string | null): AnthropicStopReason {
  switch (finishReason) {
    case "length":
      return "max_tokens";
    case "tool_calls":
    case "function_call":
      return "tool_use";
    case "content_filter":
      return "refusal";
    default:
      return stopSequence === null ? "end_turn" : "stop_sequence";
  }
}

export function anthropicUsage(usage: ChatUsage | null): AnthropicUsage {
  if (!usage) return { input_tokens: 0, output_tokens: 0 };
  const cached = Math.min(usage.cached, usage.prompt);
  const out: AnthropicUsage = { input_tokens: usage.prompt - cached, output_tokens: usage.completion };
  if (cached > 0) out.cache_read_input_tokens = cached;
  return out;
}

/** Tool arguments as Anthropic's `input` object; anything but a JSON object is `{}`. */
function parseInput(args: string): Record<string, unknown> {
  if (args.trim() === "") return {};
  try {
    const value: unknown = JSON.parse(args);
    return isRecord(value) ? value : {};
  } catch {
    return {};
  }
}
