/**
 * The translated Messages stream (src/router/adapters/messages-stream.ts) as the relay rewrites a
 * chat stream with it: message_start at once, ping events while the upstream is silent, an error
 * event as Anthropic's. And the relay reading a native Messages stream.
 */
import { describe, expect, test } from "bun:test";
import { messagesFromChatEvents, type TranslatedStreamOptions } from "../../src/router/adapters/messages-stream";
import { MESSAGES_EVENTS } from "../../src/router/adapters/anthropic-wire";
import { relaySse } from "../../src/router/sse";
import type { RelayResult } from "../../src/router/relay-options";

const encoder = new TextEncoder();
const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
  `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/** A chat stream whose parts are sent when the test says (`send`), closed by `end`. */
function controlledStream(): { stream: ReadableStream<Uint8Array>; send(text: string): void; end(): void } {
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const stream = new ReadableStream<Uint8Array>({ start: (c) => void (controller = c) });
  return { stream, send: (text) => controller.enqueue(encoder.encode(text)), end: () => controller.close() };
}

/** The event names of the SSE text read so far. */
function eventNames(text: string): string[] {
  return [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
}

/** The chat stream relayed to the client translated, as the pipeline relays it. */
function messagesFromChatStream(chat: ReadableStream<Uint8Array>, options: TranslatedStreamOptions): ReadableStream<Uint8Array> {
  return relaySse(chat, {
    clientWantsUsage: true,
    idleTimeoutMs: 60_000,
    streamTimeoutMs: 60_000,
    abortUpstream: () => {},
    onEnd: () => {},
    rewrite: messagesFromChatEvents(options),
  });
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<string> {
  return await new Response(stream).text();
}

describe("messagesFromChatEvents on the relay", () => {
  test("message_start comes before any upstream chunk; pings fill a silence; the answer ends with message_delta and message_stop", async () => {
    const upstream = controlledStream();
    const reader = messagesFromChatStream(upstream.stream, { model: "m", stopSequences: [], pingIntervalMs: 5 }).getReader();
    const decoder = new TextDecoder();
    let seen = decoder.decode((await reader.read()).value);
    expect(eventNames(seen)).toEqual(["message_start"]);
    // Nothing from the upstream: the next read is a ping.
    seen = decoder.decode((await reader.read()).value);
    expect(eventNames(seen)).toEqual(["ping"]);
    upstream.send(chunk({ role: "assistant", content: "Hi" }));
    upstream.send(`${chunk({}, "stop")}data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } })}\n\ndata: [DONE]\n\n`);
    upstream.end();
    let rest = "";
    for (let read = await reader.read(); !read.done; read = await reader.read()) rest += decoder.decode(read.value);
    const names = eventNames(rest).filter((name) => name !== "ping");
    expect(names).toEqual(["content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]);
    expect(rest).toContain('"usage":{"input_tokens":3,"output_tokens":1}');
  });

  test("the relay's error ending becomes Anthropic's error event, and nothing follows it", async () => {
    const upstream = controlledStream();
    upstream.send(chunk({ content: "Hi" }));
    upstream.send(
      `data: ${JSON.stringify({ error: { message: "the upstream connection broke before the answer was complete", type: "api_error" } })}\n\ndata: [DONE]\n\n`,
    );
    upstream.end();
    const text = await readAll(messagesFromChatStream(upstream.stream, { model: "m", stopSequences: [] }));
    expect(eventNames(text)).toEqual(["message_start", "content_block_start", "content_block_delta", "error"]);
    expect(text).toContain('{"type":"error","error":{"type":"api_error","message":"the upstream connection broke before the answer was complete"}}');
  });

  test("a stop sequence the upstream names is the stop reason, and the model is the one the client named", async () => {
    const upstream = controlledStream();
    upstream.send(
      chunk({ content: "one two" }) +
        `data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop", stop_reason: "END" }] })}\n\ndata: [DONE]\n\n`,
    );
    upstream.end();
    const text = await readAll(messagesFromChatStream(upstream.stream, { model: "my-route", stopSequences: ["END"] }));
    expect(text).toContain('"model":"my-route"');
    expect(text).toContain('"stop_reason":"stop_sequence","stop_sequence":"END"');
  });
});

describe("relaySse with the Messages dialect (a native stream)", () => {
  const event = (name: string, data: Record<string, unknown>): string => `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;
  const start = event("message_start", { message: { id: "msg_1", usage: { input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 1 } } });
  const delta = event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Hi" } });
  const finish = event("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 7 } });

  async function relayed(text: string): Promise<{ out: string; result: RelayResult }> {
    let result: RelayResult | null = null;
    const upstream = new Response(text).body!;
    const stream = relaySse(upstream, {
      clientWantsUsage: false,
      idleTimeoutMs: 5_000,
      streamTimeoutMs: 60_000,
      abortUpstream: () => {},
      onEnd: (r) => void (result = r),
      dialect: MESSAGES_EVENTS,
    });
    const out = await new Response(stream).text();
    return { out, result: result! };
  }

  test("usage from message_start and message_delta (cached prompt tokens counted); events relayed as they came, no [DONE] added", async () => {
    const text = start + delta + finish + event("message_stop", {});
    const { out, result } = await relayed(text);
    expect(out).toBe(text);
    expect(result.outcome).toBe("complete");
    expect(result.usage).toEqual({ prompt_tokens: 15, completion_tokens: 7 });
  });

  test("a stream closed before the model finished ends with Anthropic's error event", async () => {
    const { out, result } = await relayed(start + delta);
    expect(result.outcome).toBe("unfinished");
    expect(out.startsWith(start + delta)).toBe(true);
    expect(out.slice((start + delta).length)).toMatch(
      /^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"the upstream ended its stream before the answer was complete"\}\}\n\n$/,
    );
  });
});
