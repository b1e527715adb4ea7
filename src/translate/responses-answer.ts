/**
 * A chat.completion answer rewritten as an OpenAI Responses object (`object: "response"`), and
 * the builders of that object and its output items, which ./responses-stream.ts shares so that a
 * streamed answer ends with exactly the object the non-streamed one gives.
 *
 *   chatToResponse(chatCompletion, { model, echo, id?, createdAt? }) -> ResponseObject
 *
 * Output items, in order: a `reasoning` item whose summary is the upstream's reasoning, a
 * `message` with one `output_text` part, a `message` with one `refusal` part when the upstream
 * refused (its own item, as a stream gives it), then a `function_call` per tool call. Item ids
 * derive from the response id (`resp_X` -> `rs_X`, `msg_X`, a second message `msg_X_1`,
 * `fc_X_0`, ...). finish_reason length -> status `incomplete` with reason
 * `max_output_tokens`, content_filter -> `incomplete` with reason `content_filter`.
 * Usage: input_tokens (cached included, as OpenAI counts), output_tokens (reasoning included).
 */
import {
  firstChoice,
  idSuffix,
  isRecord,
  readChatUsage,
  readToolCalls,
  reasoningOf,
  stringField,
  type ChatJson,
  type ChatToolCall,
  type ChatUsage,
} from "./chat";
import type { ResponseEcho } from "./responses-request";

export type ResponseStatus = "in_progress" | "completed" | "incomplete" | "failed";

export interface OutputText {
  type: "output_text";
  text: string;
  annotations: never[];
  logprobs: never[];
}

export type OutputItem =
  | { type: "reasoning"; id: string; summary: { type: "summary_text"; text: string }[] }
  | {
      type: "message";
      id: string;
      status: "in_progress" | "completed" | "incomplete";
      role: "assistant";
      content: (OutputText | { type: "refusal"; refusal: string })[];
    }
  | { type: "function_call"; id: string; call_id: string; name: string; arguments: string; status: "in_progress" | "completed" };

interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface ResponseObject extends ResponseEcho {
  id: string;
  object: "response";
  created_at: number;
  status: ResponseStatus;
  error: { code: string; message: string } | null;
  incomplete_details: { reason: "max_output_tokens" | "content_filter" } | null;
  model: string;
  output: OutputItem[];
  usage: ResponsesUsage | null;
}

/** What every Response object of one request shares. */
export interface ResponseMeta {
  id: string;
  model: string;
  createdAt: number;
  echo: ResponseEcho;
}

export function responseObject(
  meta: ResponseMeta,
  state: { status: ResponseStatus; output: OutputItem[]; usage: ChatUsage | null; finishReason?: string; error?: { code: string; message: string } },
): ResponseObject {
  return {
    id: meta.id,
    object: "response",
    created_at: meta.createdAt,
    status: state.status,
    error: state.error ?? null,
    incomplete_details: state.status === "incomplete" ? { reason: state.finishReason === "content_filter" ? "content_filter" : "max_output_tokens" } : null,
    model: meta.model,
    output: state.output,
    usage: state.usage ? responsesUsage(state.usage) : null,
    ...meta.echo,
  };
}

/** completed, or incomplete when the upstream stopped at the token limit or its content filter. */
export function finishedStatus(finishReason: string): "completed" | "incomplete" {
  return finishReason === "length" || finishReason === "content_filter" ? "incomplete" : "completed";
}

function responsesUsage(usage: ChatUsage): ResponsesUsage {
  return {
    input_tokens: usage.prompt,
    input_tokens_details: { cached_tokens: usage.cached },
    output_tokens: usage.completion,
    output_tokens_details: { reasoning_tokens: usage.reasoning },
    total_tokens: usage.prompt + usage.completion,
  };
}

/** The id part shared by a response's item ids (`resp_X` -> `X`). */
export function itemBase(responseId: string): string {
  return responseId.replace(/^resp_/, "");
}

export function reasoningItem(id: string, text: string): OutputItem {
  return { type: "reasoning", id, summary: [{ type: "summary_text", text }] };
}

export function outputText(text: string): OutputText {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

export function functionCallItem(base: string, n: number, call: ChatToolCall, status: "in_progress" | "completed"): OutputItem {
  return { type: "function_call", id: `fc_${base}_${n}`, call_id: call.id, name: call.function.name, arguments: call.function.arguments, status };
}

export function chatToResponse(answer: ChatJson, options: { model: string; echo: ResponseEcho; id?: string; createdAt?: number }): ResponseObject {
  const choice = firstChoice(answer);
  const message = isRecord(choice?.message) ? choice.message : null;
  const finishReason = stringField(choice, "finish_reason");
  const status = finishedStatus(finishReason);
  const id = options.id ?? `resp_${idSuffix(answer)}`;
  const base = itemBase(id);
  const output: OutputItem[] = [];
  const reasoning = reasoningOf(message);
  if (reasoning) output.push(reasoningItem(`rs_${base}`, reasoning));
  const text = stringField(message, "content");
  const refusal = stringField(message, "refusal");
  const messageStatus = status === "completed" ? "completed" : "incomplete";
  if (text) output.push({ type: "message", id: `msg_${base}`, status: messageStatus, role: "assistant", content: [outputText(text)] });
  if (refusal)
    output.push({
      type: "message",
      id: text ? `msg_${base}_1` : `msg_${base}`,
      status: messageStatus,
      role: "assistant",
      content: [{ type: "refusal", refusal }],
    });
  readToolCalls(message).forEach((call, n) => output.push(functionCallItem(base, n, call, "completed")));
  const createdAt = options.createdAt ?? (typeof answer.created === "number" ? answer.created : Math.floor(Date.now() / 1000));
  return responseObject({ id, model: options.model, createdAt, echo: options.echo }, { status, output, usage: readChatUsage(answer), finishReason });
}
