/**
 * The deadlines and the connection cap as a client of the gateway meets them, through the whole
 * app over a raw loopback upstream: a stream that trickles for ever ends at stream_timeout_ms
 * with the broken-stream ending; a non-streamed body that stops is a 504 upstream_timeout at
 * idle_timeout_ms; a request waiting past max_connections waits within first_byte_timeout_ms; an
 * answer with both framings is never relayed; a host name that does not resolve is said so.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { buildTestApp } from "../support/app";
import { chunk, cleanUp, upstream, type Handler } from "../support/raw-upstream";

afterEach(cleanUp);

const ASK = { model: "m", messages: [{ role: "user", content: "hi" }] };
const EVENT = `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", choices: [{ index: 0, delta: { content: "Hi" } }] })}\n\n`;
const STREAM_HEAD = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

function appOver(handler: Handler, settings: Record<string, unknown>) {
  const server = upstream(handler);
  const app = buildTestApp({
    upstreams: [{ name: "raw", base_url: `http://127.0.0.1:${server.port}/v1`, ...settings }],
    models: [{ id: "m", targets: [{ upstream: "raw", model: "raw-model" }], free: true }],
    routing: { max_attempts: 1 },
  });
  return { server, app, state: app.deps.registry.upstreams.get("raw")!, target: app.deps.registry.resolve("m")!.targets[0] };
}

/** Writes `piece` every `everyMs` until the connection closes. */
async function trickle(conn: { isClosed: boolean; write(data: string): Promise<void> }, piece: string, everyMs: number): Promise<void> {
  while (!conn.isClosed) {
    await Bun.sleep(everyMs);
    if (!conn.isClosed) await conn.write(chunk(piece));
  }
}

describe("stream_timeout_ms", () => {
  for (const [what, piece] of [
    ["a comment every 20 ms", ": keep-alive\n\n"],
    ["a byte of an event every 20 ms", "d"],
  ]) {
    test(`an upstream that sends ${what}, never silent for idle_timeout_ms, is cut off: the error event, [DONE], recorded 502`, async () => {
      const { server, app, state, target } = appOver(
        async (req) => {
          await req.conn.write(STREAM_HEAD + chunk(EVENT));
          await trickle(req.conn, piece, 20);
        },
        { idle_timeout_ms: 150, stream_timeout_ms: 300 },
      );
      const res = await app.chat({ ...ASK, stream: true });
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(text.startsWith(EVENT)).toBe(true);
      const error =
        'data: {"error":{"message":"the upstream did not finish its answer within 300 ms before the answer was complete","type":"api_error","param":null,"code":"upstream_error"}}\n\n';
      expect(text.endsWith(`${error}data: [DONE]\n\n`)).toBe(true);
      expect(app.records.map((r) => r.status)).toEqual([502]);
      await server.conns[0].closed; // the upstream was cut off
      // Counted against the model, as a first-byte timeout is; the upstream itself stays in service.
      expect([target.circuit.consecutiveFailures, state.consecutiveFailures]).toEqual([1, 0]);
      expect(state.lastError).toBe("stream broke: the upstream did not finish its answer within 300 ms");
    }, 5_000);
  }
});

describe("idle_timeout_ms, not streamed", () => {
  test("a body that stops after its headers is a 504 upstream_timeout in the error shape, recorded 504", async () => {
    const { server, app, state, target } = appOver(
      (req) => req.conn.write('HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"id":'),
      { idle_timeout_ms: 200 },
    );
    const res = await app.chat(ASK);
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual({
      error: { message: 'upstream "raw" did not finish its answer within 200 ms', type: "api_error", param: null, code: "upstream_timeout" },
    });
    expect(app.records.map((r) => r.status)).toEqual([504]);
    await server.conns[0].closed;
    expect([target.circuit.consecutiveFailures, state.consecutiveFailures]).toEqual([1, 0]);
  }, 5_000);
});

describe("max_connections", () => {
  test("a request waiting for the only connection waits within first_byte_timeout_ms, and never reaches the upstream", async () => {
    // The first answer's body takes longer than the second request's whole wait, so the one
    // connection is never free before the second's deadline.
    const { server, app } = appOver(
      (req) => {
        req.conn.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n");
        setTimeout(() => req.conn.write("{}"), 900);
      },
      { max_connections: 1, first_byte_timeout_ms: 300, idle_timeout_ms: 3_000 },
    );
    const [first, second] = await Promise.all([app.chat(ASK), Bun.sleep(20).then(() => app.chat(ASK))]);
    expect([first.status, second.status]).toEqual([200, 504]);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe("upstream_timeout");
    expect(server.requests).toHaveLength(1);
    expect(server.conns).toHaveLength(1);
  }, 5_000);
});

describe("framing in doubt", () => {
  test("Transfer-Encoding with Content-Length is a 502 upstream_error: neither reading of the body reaches the client", async () => {
    const smuggled = JSON.stringify({ id: "x", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "smuggled" } }] });
    const { app } = appOver(
      (req) => req.conn.write(`HTTP/1.1 200 OK\r\ncontent-length: ${smuggled.length}\r\ntransfer-encoding: chunked\r\n\r\n${chunk(smuggled)}0\r\n\r\n`),
      {},
    );
    const res = await app.chat(ASK);
    expect(res.status).toBe(502);
    const body = (await res.json()) as { error: { message: string; code: string } };
    expect(body.error).toMatchObject({ code: "upstream_error", message: 'upstream "raw" sent an invalid answer: both Transfer-Encoding and Content-Length' });
    expect(app.records.map((r) => r.status)).toEqual([502]);
  }, 5_000);
});

describe("a host name that does not resolve", () => {
  for (const scheme of ["http", "https"]) {
    test(`is said so in the 502, not "connection refused" (${scheme}: ${scheme === "http" ? "the gateway's own client" : "the connect check before fetch"})`, async () => {
      const app = buildTestApp({
        upstreams: [{ name: "nowhere", base_url: `${scheme}://no-such-host.invalid/v1` }],
        models: [{ id: "m", targets: [{ upstream: "nowhere" }], free: true }],
        routing: { max_attempts: 1 },
      });
      const res = await app.chat(ASK);
      expect(res.status).toBe(502);
      expect(((await res.json()) as { error: { message: string } }).error.message).toBe('upstream "nowhere" is unreachable (its host name did not resolve)');
    }, 10_000);
  }
});
