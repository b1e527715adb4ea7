/**
 * A client that goes away while its non-streamed request still waits on the upstream, against the
 * compiled binary (src/router/client-watch.ts): the gateway closes its upstream connection whether
 * the client left before the first watch sweep (200 ms) or after it, makes no further attempt, and
 * logs the request with status 499; a client that stays gets its slow answer. The upstream is a raw
 * Bun.listen server, so the test sees exactly when the gateway closes its connection.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { startGateway, type RunningGateway } from "../support/binary";

/** One connection the gateway opened to the upstream. */
interface UpstreamConn {
  received: string;
  /** The model named in the request body, once the whole request has arrived. */
  model: string | null;
  closedAt: number | null;
}

const ANSWER = JSON.stringify({
  id: "chatcmpl-slow",
  object: "chat.completion",
  created: 0,
  model: "answers-slowly",
  choices: [{ index: 0, message: { role: "assistant", content: "worth the wait" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 },
});

const conns: UpstreamConn[] = [];
let upstream: TCPSocketListener<UpstreamConn>;
let gateway: RunningGateway;

/** Reads one request; the model "answers-slowly" is answered after 300 ms, any other never. */
function onData(socket: Socket<UpstreamConn>, data: Buffer): void {
  const conn = socket.data;
  conn.received += data.toString("latin1");
  const headEnd = conn.received.indexOf("\r\n\r\n");
  if (conn.model !== null || headEnd === -1) return;
  const length = Number(/content-length: *(\d+)/i.exec(conn.received.slice(0, headEnd))?.[1] ?? 0);
  const body = conn.received.slice(headEnd + 4);
  if (body.length < length) return;
  conn.model = JSON.parse(Buffer.from(body, "latin1").toString()).model;
  if (conn.model !== "answers-slowly") return;
  setTimeout(() => {
    if (conn.closedAt !== null) return;
    socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${ANSWER.length}\r\nconnection: close\r\n\r\n${ANSWER}`);
  }, 300);
}

beforeAll(async () => {
  const closed = (socket: Socket<UpstreamConn>) => void (socket.data.closedAt ??= performance.now());
  upstream = Bun.listen<UpstreamConn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open: (socket) => void conns.push((socket.data = { received: "", model: null, closedAt: null })),
      data: onData,
      close: closed,
      error: closed,
    },
  });
  const target = (model: string) => `[{ upstream = "raw", model = "${model}" }]`;
  gateway = await startGateway(`
[limits]
anonymous = { per_minute = 1000, per_day = 1000 }

[[upstreams]]
name = "raw"
base_url = "http://127.0.0.1:${upstream.port}/v1"

[[models]]
id = "early"
free = true
targets = ${target("silent-early")}

[[models]]
id = "late"
free = true
targets = ${target("silent-late")}

[[models]]
id = "stays"
free = true
targets = ${target("answers-slowly")}
`);
});

afterAll(async () => {
  await gateway?.stop();
  upstream?.stop(true);
});

function chat(model: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
    signal,
  });
}

/** Polls every 5 ms until `get` returns a value; fails the test after `withinMs`. */
async function waitFor<T>(what: string, withinMs: number, get: () => T | null | undefined): Promise<T> {
  const deadline = performance.now() + withinMs;
  for (;;) {
    const value = get();
    if (value !== null && value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`not within ${withinMs} ms: ${what}`);
    await Bun.sleep(5);
  }
}

function requestLine(model: string): Record<string, unknown> | undefined {
  return gateway
    .output()
    .split("\n")
    .filter((l) => l.includes('"msg":"request"'))
    .map((l) => JSON.parse(l))
    .find((r) => r.model === model);
}

/**
 * Sends a request to a silent upstream and aborts it `abortAfterMs` after it was sent (or once the
 * upstream has it, if later); the upstream connection must be open until then and closed within
 * `closeWithinMs` after; the gateway must not try again, and must log the request as failed.
 */
async function departs(model: string, upstreamModel: string, abortAfterMs: number, closeWithinMs: number): Promise<void> {
  const controller = new AbortController();
  const sentAt = performance.now();
  const answer = chat(model, controller.signal).catch((error: Error) => error);
  const conn = await waitFor(`the upstream receives the ${model} request`, 1_000, () => conns.find((c) => c.model === upstreamModel));
  await Bun.sleep(Math.max(0, sentAt + abortAfterMs - performance.now()));
  expect(conn.closedAt).toBeNull(); // still waiting on the upstream: only the departure can close it
  controller.abort();
  expect(await answer).toBeInstanceOf(Error);
  await waitFor("the gateway closes the upstream connection", closeWithinMs, () => conn.closedAt);
  const line = await waitFor(`the request line of ${model}`, 2_000, () => requestLine(model));
  expect(line.status).toBe(499); // the client closed the request: no upstream is blamed
  expect(conns.filter((c) => c.model === upstreamModel)).toHaveLength(1); // no retry for a client that left
}

// First chat request of this gateway: the sweeper starts with it, so 50 ms is before its first sweep.
test("a client that leaves before the first sweep: the upstream connection is closed", async () => {
  await departs("early", "silent-early", 50, 2_000);
});

test("a client that leaves after the first sweep: the upstream connection is closed at once", async () => {
  await departs("late", "silent-late", 400, 100);
});

test("a client that stays gets its slow answer: watching never aborts it", async () => {
  const sentAt = performance.now();
  const res = await chat("stays");
  expect(res.status).toBe(200);
  expect(await res.text()).toBe(ANSWER);
  expect(performance.now() - sentAt).toBeGreaterThanOrEqual(290);
  expect(conns.filter((c) => c.model === "answers-slowly")).toHaveLength(1);
  expect((await waitFor("the request line of stays", 2_000, () => requestLine("stays"))).status).toBe(200);
});
