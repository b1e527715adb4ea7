/**
 * A scripted chat conversation for the agents' end-to-end tests, plugged into the mock upstream as
 * its `answer`: a request that offers one of the script's tools and holds no tool result yet is
 * answered with a call of that tool; any other request with the script's final text. Chat
 * completions wire format, as JSON or as SSE with the call's arguments streamed in pieces (as real
 * servers send them), and usage when the request asks for it.
 */

interface ScriptedCall {
  /** The tool's name as the agent offers it (Claude Code's `Read`, Codex's `exec_command`). */
  name: string;
  arguments: Record<string, unknown>;
}

export interface AgentScript {
  /** The first of these that the request offers is called. */
  calls: ScriptedCall[];
  /** The answer once the conversation holds a tool result, or when no scripted tool is offered. */
  finalText: string;
}

/** Completion tokens the script reports for every answer. */
export const SCRIPTED_COMPLETION_TOKENS = 7;

export function scriptedAnswer(script: AgentScript): (body: Record<string, any>) => Response {
  return (body) => {
    const messages: Array<{ role?: string }> = Array.isArray(body.messages) ? body.messages : [];
    const offered = new Set<string>((Array.isArray(body.tools) ? body.tools : []).map((tool: any) => tool?.function?.name));
    const answered = messages.some((message) => message.role === "tool");
    const call = answered ? undefined : script.calls.find((candidate) => offered.has(candidate.name));
    const promptTokens = JSON.stringify(messages).length >> 2;
    const usage = { prompt_tokens: promptTokens, completion_tokens: SCRIPTED_COMPLETION_TOKENS, total_tokens: promptTokens + SCRIPTED_COMPLETION_TOKENS };
    const reply = { model: body.model, usage, call, text: script.finalText };
    return body.stream ? streamed(reply, body.stream_options?.include_usage === true) : whole(reply);
  };
}

interface Reply {
  model: string;
  usage: Record<string, number>;
  call: ScriptedCall | undefined;
  text: string;
}

const CALL_ID = "call_scripted_1";

function whole(reply: Reply): Response {
  const message = reply.call
    ? {
        role: "assistant",
        content: null,
        tool_calls: [{ id: CALL_ID, type: "function", function: { name: reply.call.name, arguments: JSON.stringify(reply.call.arguments) } }],
      }
    : { role: "assistant", content: reply.text };
  const finish = reply.call ? "tool_calls" : "stop";
  return Response.json({
    id: "chatcmpl-script",
    object: "chat.completion",
    created: 0,
    model: reply.model,
    choices: [{ index: 0, message, finish_reason: finish }],
    usage: reply.usage,
  });
}

function streamed(reply: Reply, includeUsage: boolean): Response {
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}): string =>
    `data: ${JSON.stringify({ id: "chatcmpl-script", object: "chat.completion.chunk", created: 0, model: reply.model, choices, ...extra })}\n\n`;
  const deltas: unknown[] = [];
  if (reply.call) {
    const args = JSON.stringify(reply.call.arguments);
    const half = args.length >> 1;
    deltas.push({
      role: "assistant",
      content: null,
      tool_calls: [{ index: 0, id: CALL_ID, type: "function", function: { name: reply.call.name, arguments: "" } }],
    });
    for (const piece of [args.slice(0, half), args.slice(half)]) deltas.push({ tool_calls: [{ index: 0, function: { arguments: piece } }] });
  } else {
    deltas.push({ role: "assistant", content: "" });
    for (const word of reply.text.split(/(?= )/)) deltas.push({ content: word });
  }
  const events = deltas.map((delta) => chunk([{ index: 0, delta, finish_reason: null }]));
  events.push(chunk([{ index: 0, delta: {}, finish_reason: reply.call ? "tool_calls" : "stop" }]));
  if (includeUsage) events.push(chunk([], { usage: reply.usage }));
  events.push("data: [DONE]\n\n");
  return new Response(events.join(""), { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}
