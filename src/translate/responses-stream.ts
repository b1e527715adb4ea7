/**
 * A chat.completions stream rewritten, chunk by chunk, as an OpenAI Responses stream.
 *
 *   const s = createResponsesStream({ model, id, echo, createdAt? })
 *   s.start()                 -> `response.created`, `response.in_progress` (sent by chunk() if not yet)
 *   s.chunk(parsedChatChunk)  -> the events one chat.completion.chunk gives ("" for none)
 *   s.end({ usage? })         -> the open item's `.done` events, then `response.completed`
 *                                (`response.incomplete` at the token limit or content filter)
 *   s.fail(message, code?)    -> `response.failed` with the items finished so far
 *   s.response()              -> the final Response object once ended (for `store`), else null
 * Every method returns SSE text (`event: TYPE\ndata: JSON\n\n`, each event with its
 * sequence_number); after end() or fail() every method returns "".
 *
 * A state machine over parsed chunks. One output item is open at a time, in the order the
 * upstream sends: a `reasoning` item (summary part, `response.reasoning_summary_text.delta`), the
 * `message` (output_text part, `response.output_text.delta`), a refusal (a `message` with a
 * refusal part, `response.refusal.delta`), each `function_call`
 * (`response.function_call_arguments.delta`). The open item's text is kept, because its `.done`
 * events and the final object repeat it whole. Items are built by ./responses-answer.ts, so the
 * object in `response.completed` is the one chatToResponse gives for the same answer.
 */
import { firstChoice, isRecord, readChatUsage, reasoningOf, stringField, type ChatJson, type ChatToolCall, type ChatUsage } from "./chat";
import {
  finishedStatus,
  functionCallItem,
  itemBase,
  outputText,
  reasoningItem,
  responseObject,
  type OutputItem,
  type ResponseMeta,
  type ResponseObject,
} from "./responses-answer";
import type { ResponseEcho } from "./responses-request";

export interface ResponsesStreamOptions {
  model: string;
  /** The response id (`resp_...`). */
  id: string;
  echo: ResponseEcho;
  /** Unix seconds; now by default. */
  createdAt?: number;
}

export interface ResponsesStream {
  start(): string;
  chunk(chunk: ChatJson): string;
  end(options?: { usage?: ChatUsage | null }): string;
  fail(message: string, code?: string): string;
  response(): ResponseObject | null;
}

export function createResponsesStream(options: ResponsesStreamOptions): ResponsesStream {
  const meta: ResponseMeta = { id: options.id, model: options.model, createdAt: options.createdAt ?? Math.floor(Date.now() / 1000), echo: options.echo };
  const base = itemBase(options.id);
  const output: OutputItem[] = [];
  let sequence = 0;
  let phase: "new" | "open" | "done" = "new";
  let open: "none" | "reasoning" | "message" | "refusal" | "function" = "none";
  /** The open item's id (and as JSON), and the open reasoning's or message's text so far (a call's arguments stay in its call). */
  let openItemId = "";
  let openId = "";
  let openText = "";
  /** Per chat tool-call index: its call and output index. */
  const calls: { call: ChatToolCall; at: number; n: number }[] = [];
  let functionCount = 0;
  let openCall: { call: ChatToolCall; n: number } | null = null;
  let finishReason = "";
  let usage: ChatUsage | null = null;
  let final: ResponseObject | null = null;
  /** Items of one kind after the first (an upstream that goes back to reasoning after text) get numbered ids. */
  const idCounts: Record<string, number> = {};

  function nextId(prefix: "rs" | "msg"): string {
    const n = (idCounts[prefix] = (idCounts[prefix] ?? -1) + 1);
    return n === 0 ? `${prefix}_${base}` : `${prefix}_${base}_${n}`;
  }

  function event(type: string, fields: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${sequence++},${fields}}\n\n`;
  }

  function at(): string {
    return `"item_id":${openId},"output_index":${output.length}`;
  }

  function lifecycle(type: string, response: ResponseObject): string {
    return event(type, `"response":${JSON.stringify(response)}`);
  }

  function start(): string {
    if (phase !== "new") return "";
    phase = "open";
    const response = responseObject(meta, { status: "in_progress", output: [], usage: null });
    return lifecycle("response.created", response) + lifecycle("response.in_progress", response);
  }

  function begin(kind: "reasoning" | "message" | "refusal", item: OutputItem, part: string): string {
    let out = close("completed");
    open = kind;
    openItemId = item.id;
    openId = JSON.stringify(item.id);
    openText = "";
    out += event("response.output_item.added", `"output_index":${output.length},"item":${JSON.stringify(item)}`);
    return out + event(kind === "reasoning" ? "response.reasoning_summary_part.added" : "response.content_part.added", `${at()},${part}`);
  }

  function close(status: "completed" | "incomplete"): string {
    let out = "";
    let item: OutputItem;
    if (open === "none") return "";
    if (open === "reasoning") {
      const part = JSON.stringify({ type: "summary_text", text: openText });
      out += event("response.reasoning_summary_text.done", `${at()},"summary_index":0,"text":${JSON.stringify(openText)}`);
      out += event("response.reasoning_summary_part.done", `${at()},"summary_index":0,"part":${part}`);
      item = reasoningItem(openItemId, openText);
    } else if (open === "message") {
      const part = outputText(openText);
      out += event("response.output_text.done", `${at()},"content_index":0,"text":${JSON.stringify(openText)},"logprobs":[]`);
      out += event("response.content_part.done", `${at()},"content_index":0,"part":${JSON.stringify(part)}`);
      item = { type: "message", id: openItemId, status, role: "assistant", content: [part] };
    } else if (open === "refusal") {
      const part = { type: "refusal" as const, refusal: openText };
      out += event("response.refusal.done", `${at()},"content_index":0,"refusal":${JSON.stringify(openText)}`);
      out += event("response.content_part.done", `${at()},"content_index":0,"part":${JSON.stringify(part)}`);
      item = { type: "message", id: openItemId, status, role: "assistant", content: [part] };
    } else {
      const { call, n } = openCall as { call: ChatToolCall; n: number };
      out += event("response.function_call_arguments.done", `${at()},"arguments":${JSON.stringify(call.function.arguments)}`);
      item = functionCallItem(base, n, call, "completed");
    }
    out += event("response.output_item.done", `"output_index":${output.length},"item":${JSON.stringify(item)}`);
    output.push(item);
    open = "none";
    return out;
  }

  function toolEvents(deltas: unknown[]): string {
    let out = "";
    for (const delta of deltas) {
      if (!isRecord(delta)) continue;
      const index = typeof delta.index === "number" ? delta.index : 0;
      const fn = isRecord(delta.function) ? delta.function : null;
      let entry = calls[index];
      if (!entry) {
        out += close("completed");
        const call: ChatToolCall = {
          id: stringField(delta, "id") || `call_${base}_${index}`,
          type: "function",
          function: { name: stringField(fn, "name"), arguments: "" },
        };
        entry = calls[index] = { call, at: output.length, n: functionCount++ };
        openCall = entry;
        open = "function";
        openId = JSON.stringify(`fc_${base}_${entry.n}`);
        out += event("response.output_item.added", `"output_index":${entry.at},"item":${JSON.stringify(functionCallItem(base, entry.n, call, "in_progress"))}`);
      }
      const args = stringField(fn, "arguments");
      if (!args) continue;
      entry.call.function.arguments += args;
      out += event(
        "response.function_call_arguments.delta",
        `"item_id":${JSON.stringify(`fc_${base}_${entry.n}`)},"output_index":${entry.at},"delta":${JSON.stringify(args)}`,
      );
    }
    return out;
  }

  function chunk(chunk: ChatJson): string {
    if (phase === "done") return "";
    let out = start();
    const reported = readChatUsage(chunk);
    if (reported) usage = reported;
    const choice = firstChoice(chunk);
    if (!choice) return out;
    const delta = isRecord(choice.delta) ? choice.delta : null;
    const reasoning = reasoningOf(delta);
    if (reasoning) {
      if (open !== "reasoning")
        out += begin("reasoning", { type: "reasoning", id: nextId("rs"), summary: [] }, `"summary_index":0,"part":{"type":"summary_text","text":""}`);
      openText += reasoning;
      out += event("response.reasoning_summary_text.delta", `${at()},"summary_index":0,"delta":${JSON.stringify(reasoning)}`);
    }
    const text = stringField(delta, "content");
    if (text) {
      if (open !== "message")
        out += begin(
          "message",
          { type: "message", id: nextId("msg"), status: "in_progress", role: "assistant", content: [] },
          `"content_index":0,"part":${JSON.stringify(outputText(""))}`,
        );
      openText += text;
      out += event("response.output_text.delta", `${at()},"content_index":0,"delta":${JSON.stringify(text)},"logprobs":[]`);
    }
    const refusal = stringField(delta, "refusal");
    if (refusal) {
      if (open !== "refusal")
        out += begin(
          "refusal",
          { type: "message", id: nextId("msg"), status: "in_progress", role: "assistant", content: [] },
          `"content_index":0,"part":{"type":"refusal","refusal":""}`,
        );
      openText += refusal;
      out += event("response.refusal.delta", `${at()},"content_index":0,"delta":${JSON.stringify(refusal)}`);
    }
    if (Array.isArray(delta?.tool_calls)) out += toolEvents(delta.tool_calls);
    const finish = stringField(choice, "finish_reason");
    if (finish) finishReason = finish;
    return out;
  }

  function end(endOptions: { usage?: ChatUsage | null } = {}): string {
    if (phase === "done") return "";
    const status = finishedStatus(finishReason);
    const out = start() + close(status);
    phase = "done";
    final = responseObject(meta, { status, output, usage: endOptions.usage ?? usage, finishReason });
    return out + lifecycle(status === "completed" ? "response.completed" : "response.incomplete", final);
  }

  function fail(message: string, code = "server_error"): string {
    if (phase === "done") return "";
    const out = start();
    phase = "done";
    return out + lifecycle("response.failed", responseObject(meta, { status: "failed", output, usage, error: { code, message } }));
  }

  return { start, chunk, end, fail, response: () => final };
}
