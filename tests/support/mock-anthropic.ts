/**
 * The mock model server's Anthropic Messages API, in its real wire format: POST /v1/messages as
 * JSON or as the event stream (message_start, content_block_start / ping / content_block_delta /
 * content_block_stop, message_delta with the usage, message_stop), POST /v1/messages/count_tokens,
 * and errors as `{"type":"error","error":{type,message}}`. With `callTool` set, a request that
 * offers tools and does not end with a tool result is answered with a call of the first tool
 * (`tool_use`); a chat request the same way gets `tool_calls` (chatToolAnswer, ./mock-responses.ts),
 * so a tool loop runs through the gateway translated or not. With `anthropicKey` set, the Messages paths take only
 * that key, in x-api-key, with an anthropic-version, as Anthropic's API does.
 */
import type { MockBehaviour } from "./mock-upstream";

export const ANTHROPIC_PATHS = ["/v1/messages", "/v1/messages/count_tokens"];

/** The arguments every mock tool call carries. */
export const MOCK_TOOL_INPUT = { city: "Paris" };

const ERROR_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  429: "rate_limit_error",
  529: "overloaded_error",
};

function anthropicError(status: number): Response {
  const type = ERROR_TYPES[status] ?? "api_error";
  return Response.json({ type: "error", error: { type, message: `mock failure ${status}` } }, { status });
}

/** The first tool's name when the request offers tools and its last message is not a tool's answer. */
function toolToCall(body: Record<string, any>, lastIsAnswer: boolean): string | null {
  const tools = body.tools;
  if (!Array.isArray(tools) || tools.length === 0 || lastIsAnswer) return null;
  return tools[0].name ?? tools[0].function?.name ?? null;
}

function endsWithToolResult(body: Record<string, any>): boolean {
  const last = body.messages?.at(-1);
  return Array.isArray(last?.content) && last.content.some((block: any) => block?.type === "tool_result");
}

export async function anthropicAnswer(
  path: string,
  request: Request,
  behaviour: MockBehaviour,
  record: (body: unknown, text: string) => void,
): Promise<Response> {
  const text = await request.text();
  const body = JSON.parse(text) as Record<string, any>;
  record(body, text);
  if (behaviour.delayMs) await Bun.sleep(behaviour.delayMs);
  if (behaviour.failWith) return anthropicError(behaviour.failWith);
  // As Anthropic's API: the key in x-api-key, never as a bearer token, and the version named.
  if (behaviour.anthropicKey !== undefined && (request.headers.get("x-api-key") !== behaviour.anthropicKey || request.headers.has("authorization")))
    return anthropicError(401);
  if (behaviour.anthropicKey !== undefined && !request.headers.has("anthropic-version")) return anthropicError(400);
  const inputTokens = Math.max(1, JSON.stringify(body.messages ?? []).length >> 2);
  if (path.endsWith("/count_tokens")) return Response.json({ input_tokens: inputTokens });
  const words = behaviour.words ?? ["Hello", " from", " the", " mock", " upstream", "."];
  const tool = behaviour.callTool ? toolToCall(body, endsWithToolResult(body)) : null;
  const content = tool ? [{ type: "tool_use", id: "toolu_mock1", name: tool, input: MOCK_TOOL_INPUT }] : [{ type: "text", text: words.join("") }];
  const stopReason = tool ? "tool_use" : "end_turn";
  const outputTokens = tool ? 12 : words.length;
  if (!body.stream) {
    return Response.json({
      id: "msg_mock",
      type: "message",
      role: "assistant",
      model: body.model,
      content,
      stop_reason: stopReason,
      stop_sequence: null,
      usage: { input_tokens: inputTokens, output_tokens: outputTokens },
    });
  }
  const event = (name: string, data: Record<string, unknown>): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
  const events = [
    event("message_start", {
      message: {
        id: "msg_mock",
        type: "message",
        role: "assistant",
        model: body.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: inputTokens, output_tokens: 1 },
      },
    }),
    event("content_block_start", {
      index: 0,
      content_block: tool ? { type: "tool_use", id: "toolu_mock1", name: tool, input: {} } : { type: "text", text: "" },
    }),
    event("ping", {}),
    ...(tool
      ? [event("content_block_delta", { index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(MOCK_TOOL_INPUT) } })]
      : words.map((word) => event("content_block_delta", { index: 0, delta: { type: "text_delta", text: word } }))),
    event("content_block_stop", { index: 0 }),
    event("message_delta", { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: outputTokens } }),
    event("message_stop", {}),
  ];
  const encoder = new TextEncoder();
  let sent = 0;
  return new Response(
    new ReadableStream({
      async pull(controller) {
        if (behaviour.chunkDelayMs && sent > 0) await Bun.sleep(behaviour.chunkDelayMs);
        if (behaviour.breakAfterChunks !== undefined && sent === behaviour.breakAfterChunks + 3)
          return controller.error(new Error("mock upstream broke the stream"));
        controller.enqueue(encoder.encode(events[sent++]));
        if (sent === events.length) controller.close();
      },
    }),
    { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } },
  );
}
