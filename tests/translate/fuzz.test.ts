/**
 * Malformed input never throws: valid requests and chunks with one subtree replaced by an odd
 * JSON value (seeded, so every run tries the same cases) give a translation or a 400 value, and
 * the stream translators keep writing well-formed SSE.
 */
import { describe, expect, test } from "bun:test";
import { messagesToChat } from "../../src/translate/anthropic-request";
import { chatToMessage } from "../../src/translate/anthropic-answer";
import { createMessagesStream } from "../../src/translate/anthropic-stream";
import { estimateInputTokens } from "../../src/translate/count-tokens";
import { chatToResponse } from "../../src/translate/responses-answer";
import { responsesToChat, type ResponseEcho } from "../../src/translate/responses-request";
import { createResponsesStream } from "../../src/translate/responses-stream";
import { REASONING, TOOLS, collect } from "./chunks";

function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

const ODD: unknown[] = [
  null,
  0,
  -1,
  1.5,
  "",
  "x",
  true,
  [],
  {},
  [null],
  { type: "zzz" },
  { type: "text" },
  { type: "image", source: {} },
  { role: "user" },
  1e308,
];

/** Every path into a JSON value, as key lists. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}

function mutate(value: unknown, rand: () => number): unknown {
  const copy = structuredClone(value);
  const all = paths(copy);
  const path = all[Math.floor(rand() * all.length)];
  const odd = ODD[Math.floor(rand() * ODD.length)];
  if (path.length === 0) return odd;
  let node = copy as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  node[path[path.length - 1]] = odd;
  return copy;
}

const messagesBody = {
  model: "m",
  max_tokens: 10,
  system: [{ type: "text", text: "s" }],
  stop_sequences: ["END"],
  metadata: { user_id: "u" },
  tools: [{ name: "t", input_schema: { type: "object" } }],
  tool_choice: { type: "tool", name: "t" },
  messages: [
    {
      role: "user",
      content: [
        { type: "text", text: "hi" },
        { type: "image", source: { type: "base64", media_type: "image/png", data: "AA" } },
      ],
    },
    {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "t" },
        { type: "tool_use", id: "a", name: "t", input: { x: 1 } },
      ],
    },
    { role: "user", content: [{ type: "tool_result", tool_use_id: "a", content: [{ type: "text", text: "r" }], is_error: false }] },
  ],
};
const responsesBody = {
  model: "m",
  instructions: "i",
  max_output_tokens: 5,
  text: { format: { type: "json_schema", name: "n", schema: {} } },
  reasoning: { effort: "low" },
  tools: [{ type: "function", name: "t", parameters: {} }],
  tool_choice: { type: "function", name: "t" },
  input: [
    {
      role: "user",
      content: [
        { type: "input_text", text: "hi" },
        { type: "input_image", image_url: "https://x/i.png" },
      ],
    },
    { type: "reasoning", summary: [{ type: "summary_text", text: "r" }] },
    { type: "function_call", call_id: "c", name: "t", arguments: "{}" },
    { type: "function_call_output", call_id: "c", output: "o" },
  ],
};

describe("malformed input never throws", () => {
  test("requests: a translation or a 400", () => {
    const rand = random(1);
    for (let i = 0; i < 2000; i++) {
      for (const out of [
        messagesToChat(mutate(messagesBody, rand)),
        estimateInputTokens(mutate(messagesBody, rand)),
        responsesToChat(mutate(responsesBody, rand)),
      ]) {
        if ("error" in out) expect(out.error.status).toBe(400);
        else expect(out).toBeObject();
      }
    }
  });

  test("answers and streams: well-formed output", () => {
    const rand = random(2);
    const echo = (responsesToChat({ model: "m", input: "x" }) as { echo: ResponseEcho }).echo;
    const chunks = [...REASONING, ...TOOLS];
    for (let i = 0; i < 500; i++) {
      const answer = mutate(collect(chunks), rand) as Record<string, unknown>;
      expect(chatToMessage(typeof answer === "object" && answer ? answer : {}, { model: "m" }).type).toBe("message");
      expect(chatToResponse(typeof answer === "object" && answer ? answer : {}, { model: "m", echo }).object).toBe("response");
      const anthropic = createMessagesStream({ model: "m", id: "msg_1" });
      const responses = createResponsesStream({ model: "m", id: "resp_1", echo });
      let sse = "";
      for (const c of chunks) {
        const odd = (rand() < 0.3 ? mutate(c, rand) : c) as Record<string, unknown>;
        const chunk = typeof odd === "object" && odd ? odd : {};
        sse += anthropic.chunk(chunk) + responses.chunk(chunk);
      }
      sse += anthropic.end() + responses.end();
      for (const event of sse.split("\n\n").filter(Boolean)) expect(() => JSON.parse(event.slice(event.indexOf("data: ") + 6))).not.toThrow();
    }
  });
});
