/**
 * The SSE relay (src/router/sse.ts) over streams the test controls: an event that arrives in many
 * reads is relayed whole (regression: a pull that enqueued nothing was never called again, and
 * the stream hung), and the idle timeout is the upstream's silence, not a slow client's.
 */
import { describe, expect, test } from "bun:test";
import { MAX_EVENT_CHARS, relaySse } from "../../src/router/sse";
import type { RelayResult } from "../../src/router/relay-options";

const encoder = new TextEncoder();
const EVENT = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "Hello there, this is one event" } }] })}\n\n`;
const DONE = "data: [DONE]\n\n";
/** The last content event of an answer: its choice finished. */
const FINAL = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`;

/** An upstream body that yields `pieces` one read at a time, `gapMs` apart, then ends; abort() breaks it at once. */
function upstreamOf(pieces: string[], gapMs: number): { body: ReadableStream<Uint8Array>; abort: (reason: string) => void; aborted: string[] } {
  const aborted: string[] = [];
  let next = 0;
  let broken: ReadableStreamDefaultController<Uint8Array> | null = null;
  const body = new ReadableStream<Uint8Array>(
    {
      start: (controller) => void (broken = controller),
      async pull(controller) {
        if (next > 0) await Bun.sleep(gapMs);
        if (aborted.length > 0) return;
        if (next === pieces.length) return controller.close();
        controller.enqueue(encoder.encode(pieces[next++]));
      },
    },
    { highWaterMark: 0 },
  );
  const abort = (reason: string): void => {
    aborted.push(reason);
    broken?.error(new Error(`aborted: ${reason}`));
  };
  return { body, abort, aborted };
}

function relay(pieces: string[], options: { gapMs: number; idleTimeoutMs: number; streamTimeoutMs?: number }) {
  const upstream = upstreamOf(pieces, options.gapMs);
  let ended: RelayResult | null = null;
  const stream = relaySse(upstream.body, {
    clientWantsUsage: false,
    idleTimeoutMs: options.idleTimeoutMs,
    streamTimeoutMs: options.streamTimeoutMs ?? 60_000,
    abortUpstream: upstream.abort,
    onEnd: (result) => void (ended = result),
  });
  return { stream, aborted: upstream.aborted, ended: () => ended };
}

function split(text: string, size: number): string[] {
  const pieces: string[] = [];
  for (let i = 0; i < text.length; i += size) pieces.push(text.slice(i, i + size));
  return pieces;
}

describe("relaySse", () => {
  test("an event split over many reads is relayed whole, once", async () => {
    const pieces = split(EVENT + EVENT + DONE, 20);
    expect(pieces.length).toBeGreaterThan(6);
    const relayed = relay(pieces, { gapMs: 2, idleTimeoutMs: 5_000 });
    expect(await new Response(relayed.stream).text()).toBe(EVENT + EVENT + DONE);
    expect(relayed.ended()).toMatchObject({ outcome: "complete", events: 2 });
  });

  test("a client that pauses longer than idle_timeout_ms is not an upstream timeout", async () => {
    const relayed = relay([EVENT, EVENT, EVENT, DONE], { gapMs: 0, idleTimeoutMs: 30 });
    const reader = relayed.stream.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    await Bun.sleep(150); // the client stops reading; the upstream has more, and is not silent
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    expect(text).toBe(EVENT + EVENT + EVENT + DONE);
    expect(relayed.aborted).toEqual([]);
    expect(relayed.ended()).toMatchObject({ outcome: "complete", events: 3 });
  });

  test("an upstream silent for idle_timeout_ms mid-event is aborted: an error event, then [DONE]", async () => {
    const relayed = relay([EVENT, EVENT.slice(0, 10)], { gapMs: 1_000, idleTimeoutMs: 30 });
    const text = await new Response(relayed.stream).text();
    expect(text.startsWith(EVENT)).toBe(true);
    expect(text).toContain("the upstream sent nothing for 30 ms");
    expect(text.endsWith(DONE)).toBe(true);
    expect(relayed.aborted).toEqual(["idle"]);
    expect(relayed.ended()).toMatchObject({ outcome: "upstream_error" });
  });

  test("an upstream that trickles comments and bytes, never silent for idle_timeout_ms, is cut off at stream_timeout_ms: an error event, then [DONE]", async () => {
    const trickle = [EVENT, ...Array.from({ length: 200 }, (_, i) => (i % 2 === 0 ? ": keep-alive\n\n" : "d"))];
    const relayed = relay(trickle, { gapMs: 10, idleTimeoutMs: 100, streamTimeoutMs: 150 });
    const text = await new Response(relayed.stream).text();
    expect(text.startsWith(`${EVENT}: keep-alive\n\n`)).toBe(true);
    expect(text).toContain("the upstream did not finish its answer within 150 ms before the answer was complete");
    expect(text.endsWith(DONE)).toBe(true);
    expect(relayed.aborted).toEqual(["stream timeout"]);
    expect(relayed.ended()).toMatchObject({ outcome: "timeout", error: "the upstream did not finish its answer within 150 ms" });
  });

  test("a client not reading at stream_timeout_ms: the request ends then, and its next read gets the error ending", async () => {
    const relayed = relay([EVENT, EVENT, EVENT, EVENT], { gapMs: 0, idleTimeoutMs: 5_000, streamTimeoutMs: 50 });
    const reader = relayed.stream.getReader();
    let text = new TextDecoder().decode((await reader.read()).value);
    await Bun.sleep(100); // the client stops reading past the deadline
    expect(relayed.ended()).toMatchObject({ outcome: "timeout" });
    expect(relayed.aborted).toEqual(["stream timeout"]);
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    expect(text).toContain("the upstream did not finish its answer within 50 ms");
    expect(text.endsWith(DONE)).toBe(true);
  });

  test("an event that never ends is cut off at MAX_EVENT_CHARS: the events before it, an error event, then [DONE] (regression: memory grew without bound)", async () => {
    const endless = Array.from({ length: 2 * (MAX_EVENT_CHARS / 65_536) + 1 }, () => "a".repeat(65_536));
    const relayed = relay([`${EVENT}data: `, ...endless], { gapMs: 0, idleTimeoutMs: 5_000 });
    const text = await new Response(relayed.stream).text();
    expect(text.startsWith(EVENT)).toBe(true);
    expect(text).toContain(`the upstream sent an event longer than ${MAX_EVENT_CHARS} characters`);
    expect(text.endsWith(DONE)).toBe(true);
    expect(text.length).toBeLessThan(10_000);
    expect(relayed.aborted).toEqual(["event too large"]);
    expect(relayed.ended()).toMatchObject({ outcome: "upstream_error", events: 1 });
  });

  test("CRLF events split between the \\r and the \\n of a boundary are relayed one by one, the usage chunk read and dropped (regression: merged, held to the end, usage lost)", async () => {
    const crlf = (event: string) => event.replaceAll("\n", "\r\n");
    const usageEvent = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 7, completion_tokens: 9 } })}\n\n`;
    const stream = crlf(EVENT + EVENT + usageEvent + DONE);
    // Every read ends right after a "\r".
    const pieces = stream.split(/(?<=\r)/);
    const relayed = relay(pieces, { gapMs: 0, idleTimeoutMs: 5_000 });
    const text = await new Response(relayed.stream).text();
    expect(text).toBe(EVENT + EVENT + DONE);
    expect(relayed.ended()).toMatchObject({ outcome: "complete", events: 2, usage: { prompt_tokens: 7, completion_tokens: 9 } });
  });

  test("a client that stops reading at [DONE], as the openai SDK does, got the whole answer: complete, not 499 (regression: recorded 499, its success never reached the circuit)", async () => {
    const usageEvent = `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 4 } })}\n\n`;
    // The upstream sends [DONE], then holds its connection open a while before ending it.
    const relayed = relay([EVENT, usageEvent + DONE, ": trailing\n\n"], { gapMs: 200, idleTimeoutMs: 5_000 });
    const reader = relayed.stream.getReader();
    let text = "";
    while (!text.includes("[DONE]")) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(relayed.ended()).toMatchObject({ outcome: "complete", usage: { prompt_tokens: 3, completion_tokens: 4 } });
  });

  test("a connection that breaks after [DONE] ends a whole answer: no error event, complete", async () => {
    const upstream = upstreamOf([EVENT, DONE], 0);
    let ended: RelayResult | null = null;
    const stream = relaySse(upstream.body, {
      clientWantsUsage: false,
      idleTimeoutMs: 5_000,
      streamTimeoutMs: 60_000,
      abortUpstream: upstream.abort,
      onEnd: (r) => void (ended = r),
    });
    const reader = stream.getReader();
    let text = "";
    while (!text.includes("[DONE]")) text += new TextDecoder().decode((await reader.read()).value);
    upstream.abort("connection reset");
    while (!(await reader.read()).done);
    expect(text).toBe(EVENT + DONE);
    expect(ended!).toMatchObject({ outcome: "complete" });
  });

  test("an event cut off mid-JSON when the upstream closes is a broken answer; a whole last event without its blank line is relayed (regression: the cut one was relayed as complete)", async () => {
    const cut = relay([EVENT, 'data: {"choices":[{"delta":{"content":"hal'], { gapMs: 0, idleTimeoutMs: 5_000 });
    const cutText = await new Response(cut.stream).text();
    expect(cutText).toStartWith(EVENT);
    expect(cutText).toContain('"code":"upstream_error"');
    expect(cutText).toEndWith(DONE);
    expect(cut.ended()).toMatchObject({ outcome: "upstream_error" });
    const whole = relay([EVENT, FINAL.trimEnd()], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(whole.stream).text()).toBe(EVENT + FINAL + DONE);
    expect(whole.ended()).toMatchObject({ outcome: "complete", events: 2 });
  });

  test("a stream that ends between events without [DONE] is whole only once the model said it finished: a finish_reason, or a usage-only chunk last (regression: a crashed server's close was relayed as a complete answer)", async () => {
    const usage = `data: ${JSON.stringify({ id: "c1", choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } })}\n\n`;
    const emptyDelta = `data: ${JSON.stringify({ id: "c1", choices: [{ index: 0, delta: {}, finish_reason: null }] })}\n\n`;
    // What may follow the finish: a comment, an empty event, a chunk with nothing in it.
    for (const after of ["", ": keep-alive\n\n", "\n\n", emptyDelta]) {
      const finished = relay([EVENT, FINAL, after], { gapMs: 0, idleTimeoutMs: 5_000 });
      expect(await new Response(finished.stream).text()).toEndWith(DONE);
      expect(finished.ended()).toMatchObject({ outcome: "complete" });
    }
    const reported = relay([EVENT, usage], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(reported.stream).text()).toBe(EVENT + DONE);
    expect(reported.ended()).toMatchObject({ outcome: "complete", usage: { prompt_tokens: 3, completion_tokens: 2 } });
    // Usage on every content chunk (vLLM's continuous_usage_stats) says nothing about the end.
    const withUsage = `data: ${JSON.stringify({ id: "c1", choices: [{ index: 0, delta: { content: "Hi" } }], usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 } })}\n\n`;
    for (const pieces of [[EVENT, EVENT], [], [withUsage, withUsage], [usage, EVENT]]) {
      const unfinished = relay(pieces, { gapMs: 0, idleTimeoutMs: 5_000 });
      const text = await new Response(unfinished.stream).text();
      expect(text).toEndWith(
        `data: {"error":{"message":"the upstream ended its stream before the answer was complete","type":"api_error","param":null,"code":"upstream_error"}}\n\n${DONE}`,
      );
      expect(unfinished.ended()).toMatchObject({ outcome: "unfinished" });
    }
  });

  test("an upstream's own error event, then the end without [DONE], is relayed as it came: no second error event, and the result names it", async () => {
    const failure = `data: ${JSON.stringify({ error: { message: "CUDA out of memory", type: "server_error" } })}\n\n`;
    const relayed = relay([EVENT, failure], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(relayed.stream).text()).toBe(EVENT + failure + DONE);
    expect(relayed.ended()).toMatchObject({ outcome: "complete", errorEvent: '{"message":"CUDA out of memory","type":"server_error"}' });
  });

  test("upstream quirks: [DONE] without the space is not doubled; a usage chunk without choices, or on several data lines, is read and dropped", async () => {
    const noSpace = relay([EVENT, "data:[DONE]\n\n"], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(noSpace.stream).text()).toBe(`${EVENT}data:[DONE]\n\n`);
    // After other fields, and as the last event without its blank line.
    const withId = relay([EVENT, "id: 7\ndata: [DONE]\n\n"], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(withId.stream).text()).toBe(`${EVENT}id: 7\ndata: [DONE]\n\n`);
    const unended = relay([EVENT, "event: done\ndata: [DONE]"], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(unended.stream).text()).toBe(`${EVENT}event: done\ndata: [DONE]\n\n`);
    expect(unended.ended()).toMatchObject({ outcome: "complete" });
    const bare = `data: ${JSON.stringify({ usage: { prompt_tokens: 5, completion_tokens: 6 } })}\n\n`;
    const multiLine = `data: {"choices": [],\ndata: "usage": {"prompt_tokens": 11, "completion_tokens": 12}}\n\n`;
    for (const [usageEvent, usage] of [
      [bare, { prompt_tokens: 5, completion_tokens: 6 }],
      [multiLine, { prompt_tokens: 11, completion_tokens: 12 }],
    ] as const) {
      const relayed = relay([EVENT, usageEvent, DONE], { gapMs: 0, idleTimeoutMs: 5_000 });
      expect(await new Response(relayed.stream).text()).toBe(EVENT + DONE);
      expect(relayed.ended()).toMatchObject({ outcome: "complete", usage });
    }
  });

  test("the client's stream ends at [DONE]: nothing after it is relayed, and an upstream that keeps its connection open is not waited for", async () => {
    const after = relay([EVENT, `${DONE}${EVENT}: more\n\n`], { gapMs: 0, idleTimeoutMs: 5_000 });
    expect(await new Response(after.stream).text()).toBe(EVENT + DONE);
    expect(after.ended()).toMatchObject({ outcome: "complete", events: 1 });
    // An upstream silent after [DONE] (the relay would otherwise sit out idle_timeout_ms, here a minute).
    const open = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode(EVENT + DONE));
      },
    });
    let ended: RelayResult | null = null;
    const stream = relaySse(open, {
      clientWantsUsage: false,
      idleTimeoutMs: 60_000,
      streamTimeoutMs: 60_000,
      abortUpstream: () => {},
      onEnd: (r) => void (ended = r),
    });
    expect(await new Response(stream).text()).toBe(EVENT + DONE);
    expect(ended!).toMatchObject({ outcome: "complete" });
  }, 5_000);
});
