/**
 * Answers that real model servers send and strict parsing would mishandle, through the whole app
 * over a raw loopback upstream: an event stream without a Content-Type, or with one in capitals
 * (regression: buffered to its end, the first relayed as application/json, the usage chunk left
 * in and unmetered), and a
 * response head whose lines end in a bare LF (regression: never recognised, so the request
 * waited out the first-byte timeout and answered 504); and a stream that carries the upstream's
 * own error event (regression: recorded 200, or 499 when the SDK stopped reading there).
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { TCPSocketListener } from "bun";
import { buildTestApp } from "../support/app";

const CHUNK = (content: string) => `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content } }] })}\n\n`;
const USAGE = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [], usage: { prompt_tokens: 7, completion_tokens: 2, total_tokens: 9 } })}\n\n`;
const SSE_BODY = `${CHUNK("Hi") + CHUNK(" there") + USAGE}data: [DONE]\n\n`;

let listener: TCPSocketListener | null = null;
afterEach(() => listener?.stop(true));

/** An upstream that answers every request with `answer`, then closes the connection. */
function rawUpstream(answer: string): string {
  listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (socket) => void socket.end(answer) } });
  return `http://127.0.0.1:${listener.port}/v1`;
}

function appOver(baseUrl: string, routing: Record<string, unknown> = {}) {
  return buildTestApp({
    upstreams: [{ name: "raw", base_url: baseUrl, first_byte_timeout_ms: 1_000 }],
    models: [{ id: "m", targets: [{ upstream: "raw", model: "raw-model" }], free: true }],
    routing,
  });
}

const ASK = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("answers from upstreams that bend the wire format", () => {
  test("an event stream without a Content-Type is relayed as one, its usage metered and stripped", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n${SSE_BODY}`));
    const res = await t.chat({ ...ASK, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe(`${CHUNK("Hi") + CHUNK(" there")}data: [DONE]\n\n`);
    expect(t.records.map((r) => [r.status, r.promptTokens, r.completionTokens])).toEqual([[200, 7, 2]]);
  });

  test("a media type in capitals is still an event stream (regression: buffered whole, under the idle timeout)", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: Text/Event-Stream; charset=UTF-8\r\nconnection: close\r\n\r\n${SSE_BODY}`));
    const res = await t.chat({ ...ASK, stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe(`${CHUNK("Hi") + CHUNK(" there")}data: [DONE]\n\n`);
    expect(t.records.map((r) => [r.promptTokens, r.completionTokens])).toEqual([[7, 2]]);
  });

  test("an event stream labelled text/plain is relayed as the stream it is, its usage stripped (regression: buffered whole, the gateway's usage chunk left in)", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n\r\n${SSE_BODY}`));
    const res = await t.chat({ ...ASK, stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(await res.text()).toBe(`${CHUNK("Hi") + CHUNK(" there")}data: [DONE]\n\n`);
    expect(t.records.map((r) => [r.status, r.promptTokens, r.completionTokens])).toEqual([[200, 7, 2]]);
  });

  test("an event stream answering a request that did not ask to stream is a 502 saying so (regression: relayed as text no client could read as JSON)", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n${SSE_BODY}`));
    const res = await t.chat(ASK);
    expect(res.status).toBe(502);
    expect(((await res.json()) as { error: { message: string } }).error.message).toBe(
      'upstream "raw" answered with an event stream to a request that did not ask to stream',
    );
    expect(t.records.map((r) => r.status)).toEqual([502]);
  });

  test("without a Content-Type, an answer to a request that did not ask to stream stays JSON", async () => {
    const json = JSON.stringify({ id: "c1", object: "chat.completion", choices: [], usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 } });
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-length: ${json.length}\r\n\r\n${json}`));
    const res = await t.chat(ASK);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(json);
    expect(t.records.map((r) => [r.promptTokens, r.completionTokens])).toEqual([[3, 4]]);
  });

  test("without a Content-Type, an answer to stream: true that came whole as JSON (a server that cannot stream) stays JSON", async () => {
    const json = JSON.stringify({ id: "c1", object: "chat.completion", choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } });
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-length: ${json.length}\r\n\r\n${json}`));
    const res = await t.chat({ ...ASK, stream: true });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(json);
    expect(t.records.map((r) => [r.status, r.promptTokens, r.completionTokens])).toEqual([[200, 3, 2]]);
  });

  test("a whole answer is relayed as application/json when typed JSON, else as text/plain with nosniff, 2xx or 4xx (regression: text/html from an upstream rendered as a page of the gateway's origin, the dashboard's)", async () => {
    const page = "<html><script>fetch('/dashboard/keys')</script></html>";
    for (const [status, type, relayed] of [
      [200, "text/html; charset=utf-8", "text/plain; charset=utf-8"],
      [400, "text/html", "text/plain; charset=utf-8"],
      [200, "application/xhtml+xml", "text/plain; charset=utf-8"],
      [200, "Application/JSON; charset=utf-8", "application/json"],
      [400, "application/problem+json", "application/json"],
      // Two types joined (two headers): a browser takes the last (regression: relayed, it rendered).
      [200, "application/json, text/html", "text/plain; charset=utf-8"],
      [200, "text/html; x=text/event-stream", "text/plain; charset=utf-8"],
    ] as const) {
      const t = appOver(rawUpstream(`HTTP/1.1 ${status} X\r\ncontent-type: ${type}\r\ncontent-length: ${page.length}\r\nconnection: close\r\n\r\n${page}`));
      const res = await t.chat(ASK);
      expect([res.status, res.headers.get("content-type"), await res.text()]).toEqual([status, relayed, page]);
      expect(res.headers.get("x-content-type-options")).toBe(relayed.startsWith("text/plain") ? "nosniff" : null);
      listener?.stop(true);
    }
    // Asked to stream, a type that merely mentions the event stream is not relayed as it came (regression: relayed verbatim, rendered as HTML).
    const t = appOver(
      rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/html; x=text/event-stream\r\ncontent-length: ${page.length}\r\nconnection: close\r\n\r\n${page}`),
    );
    expect((await t.chat({ ...ASK, stream: true })).headers.get("content-type")).toBe("text/event-stream");
  });

  test("a 2xx answer that is empty, or framed by the connection's close and cut short of its JSON, is a 502, not a success (regression: relayed as 200, and counted as the upstream's success)", async () => {
    const whole = JSON.stringify({ id: "c1", object: "chat.completion", choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
    const cases: Array<[string, number]> = [
      [`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${whole.slice(0, 30)}`, 502],
      [`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 0\r\n\r\n`, 502],
      [`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n${whole}`, 200],
    ];
    for (const [answer, status] of cases) {
      const t = appOver(rawUpstream(answer));
      const res = await t.chat(ASK);
      expect(res.status).toBe(status);
      expect(t.records.map((r) => r.status)).toEqual([status]);
      if (status === 502) expect(((await res.json()) as { error: { code: string } }).error.code).toBe("upstream_error");
      listener?.stop(true);
    }
  });

  test("a head with bare LF line endings is read as its CRLF form", async () => {
    const json = '{"id":"c1","object":"chat.completion","choices":[]}';
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\ncontent-type: application/json\ncontent-length: ${json.length}\n\n${json}`));
    const res = await t.chat(ASK);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(await res.text()).toBe(json);
  });

  test("a bare-LF head of a stream, with mixed line endings, is read too", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\nconnection: close\n\r\n${SSE_BODY}`));
    const res = await t.chat({ ...ASK, stream: true, stream_options: { include_usage: true } });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(SSE_BODY);
  });
});

/**
 * The request was recorded as a 502 that counts against the model's target, with `lastError` as
 * the upstream's last error; the upstream itself answered, so its own circuit stays closed.
 */
function expectModelFailed(t: ReturnType<typeof appOver>, lastError: string): void {
  expect(t.records.map((r) => r.status)).toEqual([502]);
  const target = t.deps.registry.resolve("m")!.targets[0];
  expect(target.circuit.cooldownUntil).toBeGreaterThan(0);
  expect(target.upstream.lastError).toBe(lastError);
  expect(target.upstream.cooldownUntil).toBe(0);
}

describe("an error event in the stream", () => {
  const ERROR_EVENT = `data: ${JSON.stringify({ error: { message: "CUDA out of memory", type: "internal_error", code: 500 } })}\n\n`;
  const answer = `HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n${CHUNK("Hi")}${ERROR_EVENT}data: [DONE]\n\n`;

  test("is relayed as it came, and the request is recorded as the upstream's failure: 502, counted against the model's target", async () => {
    const t = appOver(rawUpstream(answer), { cooldown_failures: 1 });
    const res = await t.chat({ ...ASK, stream: true });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`${CHUNK("Hi") + ERROR_EVENT}data: [DONE]\n\n`);
    expectModelFailed(t, 'upstream "raw" sent an error event: CUDA out of memory');
  });

  test("without [DONE] after it, the same: relayed once, the upstream's own message in last_error, its target's circuit alone (regression: a second error event, and the upstream's circuit)", async () => {
    const t = appOver(rawUpstream(answer.replace("data: [DONE]\n\n", "")), { cooldown_failures: 1 });
    const res = await t.chat({ ...ASK, stream: true });
    expect(await res.text()).toBe(`${CHUNK("Hi") + ERROR_EVENT}data: [DONE]\n\n`);
    expectModelFailed(t, 'upstream "raw" sent an error event: CUDA out of memory');
  });

  test("a stream closed in good order before the model finished counts against its target, not the upstream: other models stay up", async () => {
    const t = appOver(rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n${CHUNK("Hi")}`), { cooldown_failures: 1 });
    const text = await (await t.chat({ ...ASK, stream: true })).text();
    expect(text).toContain("the upstream ended its stream before the answer was complete");
    expectModelFailed(t, 'upstream "raw" ended its stream before the answer was complete');
  });

  test("the gateway's key for the upstream, should the event echo it, does not reach the client (regression: relayed in clear, to anonymous callers too)", async () => {
    const key = "sk-provider-0123456789";
    const echoing = `data: ${JSON.stringify({ error: { message: `quota exhausted for key ${key}` } })}\n\n`;
    const url = rawUpstream(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n${CHUNK("Hi")}${echoing}data: [DONE]\n\n`);
    const t = buildTestApp({
      upstreams: [{ name: "raw", base_url: url, api_key: key }],
      models: [{ id: "m", targets: [{ upstream: "raw" }], free: true }],
    });
    const text = await (await t.chat({ ...ASK, stream: true })).text();
    expect(text).not.toContain(key);
    expect(text).toContain('"quota exhausted for key [redacted]"');
    expect(t.deps.registry.resolve("m")!.targets[0].upstream.lastError).toBe('upstream "raw" sent an error event: quota exhausted for key [redacted]');
  });

  test("a client that stops reading at the error event (as the SDKs do) is not recorded as having left", async () => {
    // The upstream sends the error event and then nothing: the client's cancel ends the stream.
    listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (socket) => void socket.write(answer.slice(0, answer.indexOf("data: [DONE]"))) } });
    const t = appOver(`http://127.0.0.1:${listener.port}/v1`);
    const reader = (await t.chat({ ...ASK, stream: true })).body!.getReader();
    let seen = "";
    while (!seen.includes("CUDA")) seen += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    expect(t.records.map((r) => r.status)).toEqual([502]);
  });
});
