/**
 * The mock upstream's OpenAI Responses endpoint (POST /v1/responses, JSON or SSE in the event
 * sequence OpenAI sends), and chat answers with tool calls and reasoning for the translated sides
 * (Responses and Messages alike). Both call the first function tool offered (arguments
 * {"city":"Paris"}) unless the conversation already holds its output (chat: unless `callTool` is
 * off), and otherwise answer with the words; `reasoning` adds a reasoning
 * summary (Responses) or `reasoning_content` (chat). The mock keeps no responses: the gateway
 * sends whole conversations.
 */
import { MOCK_TOOL_INPUT } from "./mock-anthropic";

export interface ResponsesBehaviour {
  /**
   * Chat answers call the first function tool offered (as the Responses endpoint always does),
   * unless the last message is a tool's answer (then they answer with the words).
   */
  callTool?: boolean;
  /** Reasoning the model "thought" before answering. */
  reasoning?: string;
}

interface Options extends ResponsesBehaviour {
  words: string[];
  /** Send this many output deltas, then break the connection. */
  breakAfterChunks?: number;
  /** Delay between events (ms). */
  chunkDelayMs?: number;
}

const ARGUMENTS = JSON.stringify(MOCK_TOOL_INPUT);
const encoder = new TextEncoder();

function firstTool(tools: unknown): string | null {
  if (!Array.isArray(tools)) return null;
  const tool = tools.find((t) => t?.type === "function" || (t?.type === undefined && t?.function));
  return tool ? (tool.name ?? tool.function?.name ?? null) : null;
}

function sse(events: Array<Record<string, unknown>>, options: Options): Response {
  let sent = 0;
  let deltas = 0;
  const breakAfter = options.breakAfterChunks;
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      // The delay comes first so that events sent before a break have left the socket.
      if (options.chunkDelayMs && sent > 0) await Bun.sleep(options.chunkDelayMs);
      if (sent === events.length) return controller.close();
      const event = events[sent++];
      if (typeof event.type === "string" && event.type.endsWith(".delta") && breakAfter !== undefined && deltas++ === breakAfter) {
        controller.error(new Error("mock upstream broke the stream"));
        return;
      }
      controller.enqueue(encoder.encode(`event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`));
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

/** POST /v1/responses as OpenAI answers it. */
export function responsesAnswer(body: Record<string, any>, options: Options): Response {
  const id = `resp_${crypto.randomUUID().replaceAll("-", "")}`;
  const input = Array.isArray(body.input) ? body.input : [];
  const tool = input.some((item: any) => item?.type === "function_call_output") ? null : firstTool(body.tools);
  const output: Array<Record<string, any>> = [];
  if (options.reasoning) output.push({ type: "reasoning", id: `rs_${id}`, summary: [{ type: "summary_text", text: options.reasoning }] });
  if (tool) output.push({ type: "function_call", id: `fc_${id}`, call_id: `call_${id.slice(5, 13)}`, name: tool, arguments: ARGUMENTS, status: "completed" });
  else
    output.push({
      type: "message",
      id: `msg_${id}`,
      status: "completed",
      role: "assistant",
      content: [{ type: "output_text", text: options.words.join(""), annotations: [] }],
    });
  const inputTokens = Math.max(1, JSON.stringify(body.input ?? "").length >> 2);
  const usage = {
    input_tokens: inputTokens,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: options.words.length,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputTokens + options.words.length,
  };
  const base = {
    id,
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    model: body.model,
    instructions: body.instructions ?? null,
    tools: body.tools ?? [],
    store: body.store ?? true,
    previous_response_id: null,
    error: null,
    incomplete_details: null,
  };
  const done = { ...base, status: "completed", output, usage };
  if (!body.stream) return Response.json(done);
  const events: Array<Record<string, unknown>> = [];
  const push = (type: string, fields: Record<string, unknown>): void => void events.push({ type, sequence_number: events.length, ...fields });
  push("response.created", { response: { ...base, status: "in_progress", output: [], usage: null } });
  push("response.in_progress", { response: { ...base, status: "in_progress", output: [], usage: null } });
  output.forEach((item, at) => {
    const at_ = { item_id: item.id, output_index: at };
    if (item.type === "reasoning") {
      push("response.output_item.added", { output_index: at, item: { ...item, summary: [] } });
      push("response.reasoning_summary_text.delta", { ...at_, summary_index: 0, delta: options.reasoning });
      push("response.reasoning_summary_text.done", { ...at_, summary_index: 0, text: options.reasoning });
    } else if (item.type === "function_call") {
      push("response.output_item.added", { output_index: at, item: { ...item, arguments: "", status: "in_progress" } });
      for (const half of [ARGUMENTS.slice(0, 8), ARGUMENTS.slice(8)]) push("response.function_call_arguments.delta", { ...at_, delta: half });
      push("response.function_call_arguments.done", { ...at_, arguments: ARGUMENTS });
    } else {
      push("response.output_item.added", { output_index: at, item: { ...item, status: "in_progress", content: [] } });
      push("response.content_part.added", { ...at_, content_index: 0, part: { type: "output_text", text: "", annotations: [] } });
      for (const word of options.words) push("response.output_text.delta", { ...at_, content_index: 0, delta: word });
      push("response.output_text.done", { ...at_, content_index: 0, text: options.words.join("") });
      push("response.content_part.done", { ...at_, content_index: 0, part: item.content[0] });
    }
    push("response.output_item.done", { output_index: at, item });
  });
  push("response.completed", { response: done });
  return sse(events, options);
}

/**
 * A chat answer that calls the first function tool (with `callTool`, unless the last message is a
 * tool's answer) or answers with the words, with reasoning_content when set; null when it would
 * do neither (the mock's plain answer then).
 */
export function chatToolAnswer(body: Record<string, any>, options: Options): Response | null {
  const messages = Array.isArray(body.messages) ? body.messages : [];
  const tool = options.callTool && messages.at(-1)?.role !== "tool" ? firstTool(body.tools) : null;
  if (tool === null && !options.reasoning) return null;
  const text = options.words.join("");
  const promptTokens = Math.max(1, JSON.stringify(messages).length >> 2);
  const usage = { prompt_tokens: promptTokens, completion_tokens: options.words.length, total_tokens: promptTokens + options.words.length };
  const call = tool ? { id: "call_mock_0", type: "function", function: { name: tool, arguments: ARGUMENTS } } : null;
  const finish = call ? "tool_calls" : "stop";
  const head = { id: "chatcmpl-tools", created: Math.floor(Date.now() / 1000), model: body.model };
  if (!body.stream) {
    const message = {
      role: "assistant",
      content: call ? null : text,
      ...(call ? { tool_calls: [call] } : {}),
      ...(options.reasoning ? { reasoning_content: options.reasoning } : {}),
    };
    return Response.json({ ...head, object: "chat.completion", choices: [{ index: 0, message, finish_reason: finish }], usage });
  }
  const chunks: Array<Record<string, unknown>> = [];
  const delta = (d: Record<string, unknown>, finish_reason: string | null = null): void =>
    void chunks.push({ ...head, object: "chat.completion.chunk", choices: [{ index: 0, delta: d, finish_reason }] });
  if (options.reasoning) delta({ role: "assistant", reasoning_content: options.reasoning });
  if (call) {
    delta({ tool_calls: [{ index: 0, id: call.id, type: "function", function: { name: tool, arguments: "" } }] });
    for (const half of [ARGUMENTS.slice(0, 8), ARGUMENTS.slice(8)]) delta({ tool_calls: [{ index: 0, function: { arguments: half } }] });
  } else for (const word of options.words) delta({ content: word });
  delta({}, finish);
  if (body.stream_options?.include_usage) chunks.push({ ...head, object: "chat.completion.chunk", choices: [], usage });
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
      controller.enqueue(encoder.encode("data: [DONE]\n\n"));
      controller.close();
    },
  });
  return new Response(stream, { headers: { "content-type": "text/event-stream" } });
}
