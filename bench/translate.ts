/**
 * CPU cost of the translation layer (src/translate/), measured never asserted: what a translated
 * request costs beyond native pass-through. Run alone: `bun bench/translate.ts`.
 *
 * - per request (non-streamed): the request translated (messagesToChat / responsesToChat on the
 *   parsed body) and serialized for the upstream, plus the upstream's parsed answer translated
 *   (chatToMessage / chatToResponse) and serialized for the client. A native request skips the
 *   translations but serializes too, so this counts a little more than the difference.
 * - per streamed event: one parsed chat.completion.chunk through the stream translator, its SSE
 *   text out (text deltas, and tool-call argument fragments), stream start and end included and
 *   spread over the chunks.
 * Each figure is the median of 7 rounds of CPU time (process.cpuUsage) over many iterations,
 * after a warm-up round.
 */
import { chatToMessage } from "../src/translate/anthropic-answer";
import { messagesToChat } from "../src/translate/anthropic-request";
import { createMessagesStream } from "../src/translate/anthropic-stream";
import { chatToResponse } from "../src/translate/responses-answer";
import { responsesToChat } from "../src/translate/responses-request";
import { createResponsesStream } from "../src/translate/responses-stream";

const ROUNDS = 7;

function cpuMicros(iterations: number, run: () => void): number {
  const times: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    const before = process.cpuUsage();
    for (let i = 0; i < iterations; i++) run();
    const used = process.cpuUsage(before);
    if (round > 0) times.push((used.user + used.system) / iterations);
  }
  return times.sort((a, b) => a - b)[ROUNDS >> 1];
}

const tools = [
  {
    name: "get_weather",
    description: "Current weather for a city",
    input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
];
const messagesBody = {
  model: "route-a",
  max_tokens: 512,
  system: "You are a helpful assistant. Answer briefly.",
  tools,
  messages: [
    { role: "user", content: "What is the weather in Paris?" },
    {
      role: "assistant",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
      ],
    },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "18C and sunny" }] },
  ],
};
const responsesBody = {
  model: "route-r",
  instructions: "You are a helpful assistant. Answer briefly.",
  tools: [{ type: "function", name: "get_weather", description: "Current weather for a city", parameters: tools[0].input_schema }],
  input: [
    { role: "user", content: "What is the weather in Paris?" },
    { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Paris"}' },
    { type: "function_call_output", call_id: "call_1", output: "18C and sunny" },
  ],
};
const answer = {
  id: "chatcmpl-abc123",
  object: "chat.completion",
  created: 1700000000,
  model: "up",
  choices: [
    { index: 0, message: { role: "assistant", content: "It is 18C and sunny in Paris today, a fine day for a walk along the Seine." }, finish_reason: "stop" },
  ],
  usage: { prompt_tokens: 120, completion_tokens: 20, total_tokens: 140 },
};

function chunk(delta: Record<string, unknown>, finish: string | null = null): Record<string, unknown> {
  return { id: "chatcmpl-abc123", object: "chat.completion.chunk", created: 1700000000, model: "up", choices: [{ index: 0, delta, finish_reason: finish }] };
}
const textChunks = [chunk({ role: "assistant", content: "" }), ...Array.from({ length: 100 }, (_, i) => chunk({ content: ` word${i}` })), chunk({}, "stop")];
const toolChunks = [
  chunk({ role: "assistant", content: null, tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } }] }),
  ...Array.from({ length: 100 }, (_, i) => chunk({ tool_calls: [{ index: 0, function: { arguments: i === 0 ? '{"city":"' : "x" } }] })),
  chunk({}, "tool_calls"),
];
const usageChunk = {
  id: "chatcmpl-abc123",
  object: "chat.completion.chunk",
  choices: [],
  usage: { prompt_tokens: 120, completion_tokens: 100, total_tokens: 220 },
};

function messagesRequest(): void {
  const t = messagesToChat(messagesBody);
  if ("error" in t) throw new Error(t.error.message);
  JSON.stringify(t.chat);
  JSON.stringify(chatToMessage(answer, { model: "route-a", stopSequences: t.stopSequences }));
}

function responsesRequest(): void {
  const t = responsesToChat(responsesBody);
  if ("error" in t) throw new Error(t.error.message);
  JSON.stringify(t.chat);
  JSON.stringify(chatToResponse(answer, { model: "route-r", echo: t.echo }));
}

const echo = (responsesToChat(responsesBody) as { echo: Parameters<typeof chatToResponse>[1]["echo"] }).echo;

function messagesStream(chunks: Record<string, unknown>[]): () => void {
  return () => {
    const s = createMessagesStream({ model: "route-a", id: "msg_abc123" });
    let out = s.start();
    for (const c of chunks) out += s.chunk(c);
    out += s.chunk(usageChunk) + s.end();
    if (out.length === 0) throw new Error("no output");
  };
}

function responsesStream(chunks: Record<string, unknown>[]): () => void {
  return () => {
    const s = createResponsesStream({ model: "route-r", id: "resp_abc123", echo, createdAt: 1700000000 });
    let out = s.start();
    for (const c of chunks) out += s.chunk(c);
    out += s.chunk(usageChunk) + s.end();
    if (out.length === 0) throw new Error("no output");
  };
}

const rows: [string, number][] = [
  ["Messages, per non-streamed request", cpuMicros(20_000, messagesRequest)],
  ["Responses, per non-streamed request", cpuMicros(20_000, responsesRequest)],
  ["Messages stream, per text chunk", cpuMicros(500, messagesStream(textChunks)) / (textChunks.length + 1)],
  ["Messages stream, per tool-argument chunk", cpuMicros(500, messagesStream(toolChunks)) / (toolChunks.length + 1)],
  ["Responses stream, per text chunk", cpuMicros(500, responsesStream(textChunks)) / (textChunks.length + 1)],
  ["Responses stream, per tool-argument chunk", cpuMicros(500, responsesStream(toolChunks)) / (toolChunks.length + 1)],
];
for (const [name, micros] of rows) console.log(`${name.padEnd(44)} ${micros.toFixed(2)} µs CPU`);
