import { describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { chatToMessage } from "../../src/translate/anthropic-answer";
import { createMessagesStream } from "../../src/translate/anthropic-stream";
import { INTERLEAVED, LENGTH, REASONING, REFUSAL, STOP_SEQUENCE, TEXT, TOOLS, collect } from "./chunks";
import { anthropicClient, eventNames } from "./support";

const request = { model: "route-a", max_tokens: 100, messages: [{ role: "user" as const, content: "x" }] };

function translate(chunks: Record<string, unknown>[], options: { stopSequences?: string[]; pingEvery?: number } = {}): string {
  const stream = createMessagesStream({ model: "route-a", id: "msg_abc123", stopSequences: options.stopSequences });
  let sse = stream.start();
  chunks.forEach((c, i) => {
    sse += stream.chunk(c);
    if (options.pingEvery && i % options.pingEvery === 0) sse += stream.ping();
  });
  return sse + stream.end();
}

/** The message the SDK's MessageStream accumulates, without the SDK's own parse helper (`parsed_output`). */
async function finalMessage(sse: string): Promise<Record<string, any>> {
  const message = await anthropicClient(sse).messages.stream(request).finalMessage();
  return JSON.parse(JSON.stringify(message, (key, value) => (key === "parsed_output" ? undefined : value)));
}

describe("createMessagesStream through the official SDK's MessageStream", () => {
  test.each([
    ["text", TEXT, []],
    ["reasoning", REASONING, []],
    ["tool calls with split arguments", TOOLS, []],
    ["a matched stop sequence", STOP_SEQUENCE, ["END"]],
    ["length", LENGTH, []],
    ["a refusal", REFUSAL, []],
  ] as const)("%s: the final message equals the non-streamed translation", async (_name, chunks, stopSequences) => {
    const streamed = await finalMessage(translate([...chunks], { stopSequences: [...stopSequences], pingEvery: 2 }));
    expect(streamed).toEqual(chatToMessage(collect([...chunks]), { model: "route-a", stopSequences, id: "msg_abc123" }));
  });

  test("reasoning after text opens new blocks, in order", async () => {
    expect((await finalMessage(translate(INTERLEAVED))).content).toEqual([
      { type: "thinking", thinking: "First.", signature: "" },
      { type: "text", text: "Part one." },
      { type: "thinking", thinking: "Then.", signature: "" },
      { type: "text", text: "Part two." },
    ]);
  });

  test("the event sequence of a text answer", () => {
    expect(eventNames(translate(TEXT))).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
  });

  test("tool calls: a block per call in order, input_json_delta fragments as sent, usage in message_delta", () => {
    const sse = translate(TOOLS);
    const events = sse
      .split("\n\n")
      .filter(Boolean)
      .map((e) => JSON.parse(e.slice(e.indexOf("data: ") + 6)));
    expect(events.filter((e) => e.type === "content_block_start").map((e) => [e.index, e.content_block])).toEqual([
      [0, { type: "text", text: "" }],
      [1, { type: "tool_use", id: "call_1", name: "get_weather", input: {} }],
      [2, { type: "tool_use", id: "call_2", name: "get_time", input: {} }],
    ]);
    expect(events.filter((e) => e.delta?.type === "input_json_delta").map((e) => [e.index, e.delta.partial_json])).toEqual([
      [1, '{"city":'],
      [1, ' "Paris"}'],
      [2, '{"tz"'],
      [2, ': "CET"}'],
    ]);
    expect(events.filter((e) => e.type === "content_block_stop").map((e) => e.index)).toEqual([0, 1, 2]);
    expect(events.find((e) => e.type === "message_delta")).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { input_tokens: 30, output_tokens: 20 },
    });
  });

  test("ping events are well-formed and ignored by the SDK", async () => {
    const stream = createMessagesStream({ model: "route-a", id: "msg_1" });
    const sse = stream.ping() + stream.start() + stream.ping() + TEXT.map((c) => stream.chunk(c) + stream.ping()).join("") + stream.end();
    expect(eventNames(sse).slice(0, 2)).toEqual(["message_start", "ping"]);
    expect(stream.ping()).toBe("");
    expect((await finalMessage(sse)).content).toEqual([{ type: "text", text: 'Hello, "world"\nünïcode ✓' }]);
  });

  test("start() is implied by the first chunk and sent once", () => {
    const stream = createMessagesStream({ model: "m", id: "msg_1" });
    const sse = stream.chunk(TEXT[1]) + stream.start() + stream.end();
    expect(eventNames(sse).filter((n) => n === "message_start")).toHaveLength(1);
  });

  test("usage given to end() wins over the stream's", async () => {
    const stream = createMessagesStream({ model: "m", id: "msg_1" });
    const sse =
      TEXT.slice(0, 5)
        .map((c) => stream.chunk(c))
        .join("") + stream.end({ usage: { prompt: 3, completion: 2, cached: 0, reasoning: 0 } });
    expect((await finalMessage(sse)).usage).toMatchObject({ input_tokens: 3, output_tokens: 2 });
  });

  test("a stream that breaks ends with an Anthropic error event the SDK throws as the API's error", async () => {
    const stream = createMessagesStream({ model: "route-a", id: "msg_1" });
    const sse = stream.chunk(TOOLS[0]) + stream.chunk(TOOLS[1]) + stream.chunk(TOOLS[2]) + stream.fail("The upstream stopped answering", "overloaded_error");
    expect(stream.chunk(TOOLS[3]) + stream.end() + stream.fail("again")).toBe("");
    expect(eventNames(sse).at(-1)).toBe("error");
    const err = await finalMessage(sse).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect((err as InstanceType<typeof Anthropic.APIError>).error).toEqual({
      type: "error",
      error: { type: "overloaded_error", message: "The upstream stopped answering" },
    });
  });

  test("a failure before any chunk still opens the message first", () => {
    const stream = createMessagesStream({ model: "m", id: "msg_1" });
    expect(eventNames(stream.fail("boom"))).toEqual(["message_start", "error"]);
  });
});
