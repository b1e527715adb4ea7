/**
 * What base_url may carry besides a path, on the wire to a raw upstream that records each request
 * head: a user and password become `Authorization: Basic` on chat requests as on discovery
 * (regression: discovery sent them, chat requests did not, and every chat was a 401 from the
 * proxy); a query (Azure's `?api-version=`) stays after the endpoint's path (regression: the path
 * was appended to the query); a fragment is dropped.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { TCPSocketListener } from "bun";
import { buildTestApp } from "../support/app";
import { discoverOnce } from "../../src/router/discover";
import { ModelRegistry } from "../../src/router/registry";
import { buildConfig } from "../../src/config/load";
import { createUpstreamState } from "../../src/router/upstream-setup";

const COMPLETION = JSON.stringify({ id: "c1", object: "chat.completion", choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
const MODELS = JSON.stringify({ object: "list", data: [{ id: "found", object: "model" }] });

let listener: TCPSocketListener<{ head: string; answered: boolean }> | null = null;
afterEach(() => listener?.stop(true));

/** An upstream that records each request's head and answers models or a completion, then closes. */
function recordingUpstream(heads: string[]): number {
  listener = Bun.listen<{ head: string; answered: boolean }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open: (socket) => void (socket.data = { head: "", answered: false }),
      data: (socket, bytes) => {
        socket.data.head += bytes.toString("latin1");
        const end = socket.data.head.indexOf("\r\n\r\n");
        if (end === -1 || socket.data.answered) return;
        socket.data.answered = true;
        heads.push(socket.data.head.slice(0, end));
        const body = socket.data.head.startsWith("GET") ? MODELS : COMPLETION;
        socket.end(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
      },
    },
  });
  return listener.port;
}

const header = (head: string, name: string) =>
  head
    .split("\r\n")
    .find((line) => line.toLowerCase().startsWith(`${name}:`))
    ?.slice(name.length + 1)
    .trim() ?? null;

async function callBoth(baseUrl: string, extra: Record<string, unknown> = {}): Promise<void> {
  const upstream = { name: "up", base_url: baseUrl, ...extra };
  const t = buildTestApp({ upstreams: [upstream], models: [{ id: "m", targets: [{ upstream: "up" }], free: true }] });
  expect((await t.chat({ model: "m", messages: [{ role: "user", content: "hi" }] })).status).toBe(200);
  const { config } = buildConfig({ upstreams: [{ ...upstream, discover: true }] }, { env: {} });
  expect(await discoverOnce(new ModelRegistry(config), config.upstreams[0], () => {})).toBe(true);
}

describe("base_url", () => {
  test("a user and password in it are sent as Basic authorization, to chat and discovery alike, and are in no request line", async () => {
    const heads: string[] = [];
    const port = recordingUpstream(heads);
    await callBoth(`http://bob:s3cret%40x@127.0.0.1:${port}/v1`);
    const basic = `Basic ${Buffer.from("bob:s3cret@x").toString("base64")}`;
    expect(heads.map((h) => [h.split("\r\n")[0], header(h, "authorization")])).toEqual([
      ["POST /v1/chat/completions HTTP/1.1", basic],
      ["GET /v1/models HTTP/1.1", basic],
    ]);
  });

  test("the password is taken out of what the upstream says, as an api_key is", async () => {
    const echo = JSON.stringify({ error: { message: "bad credentials bob:s3cret-pass-word" } });
    listener = Bun.listen<{ head: string; answered: boolean }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data: (socket) => void socket.end(`HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: ${echo.length}\r\n\r\n${echo}`),
      },
    });
    const t = buildTestApp({
      upstreams: [{ name: "up", base_url: `http://bob:s3cret-pass-word@127.0.0.1:${listener.port}/v1` }],
      models: [{ id: "m", targets: [{ upstream: "up" }], free: true }],
    });
    const res = await t.chat({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(res.status).toBe(400);
    expect(await res.text()).toBe(echo.replace("s3cret-pass-word", "[redacted]"));
  });

  test("no form of its credentials comes back from an upstream that echoes its request: the Basic header's base64, the password, the query (regression: relayed in errors, /api/status and the dashboard)", async () => {
    let requests = 0;
    listener = Bun.listen<{ head: string; answered: boolean }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        data: (socket, bytes) => {
          const head = bytes.toString("latin1");
          const echo = JSON.stringify({ error: { message: `bad auth: ${header(head, "authorization")} line=${head.split("\r\n")[0]}` } });
          const status = requests++ === 0 ? "400 Bad Request" : "500 Internal Server Error";
          socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${echo.length}\r\nconnection: close\r\n\r\n${echo}`);
        },
      },
    });
    const t = buildTestApp({
      upstreams: [{ name: "up", base_url: `http://bob:hunter2pass@127.0.0.1:${listener.port}/v1?api-version=1&key=querysecret99` }],
      models: [{ id: "m", targets: [{ upstream: "up" }], free: true }],
    });
    const secrets = ["hunter2pass", Buffer.from("bob:hunter2pass").toString("base64"), "querysecret99"];
    const refused = await t.chat({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(refused.status).toBe(400);
    const failed = await t.chat({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(failed.status).toBe(502);
    const status = await (await t.app.handle(new Request("http://localhost/api/status"))).text();
    const said = [await refused.text(), await failed.text(), status];
    for (const text of said) for (const secret of secrets) expect(text).not.toContain(secret);
    expect(said[0]).toContain("bad auth: Basic [redacted] line=POST /v1/chat/completions?[redacted] HTTP/1.1");
    expect(said[1]).toContain("bad auth: Basic [redacted]");
  });

  test("what counts as a credential in it: the password, its Basic form, the query whole, and the values of parameters named as credentials; not the others, which would garble messages", () => {
    const base_url = "http://bob:p%40ss-word@127.0.0.1:9/v1?api-version=2024-06-01-preview&sig=abc%2Fdef123&code=functionkey1&model=default-model";
    const { config } = buildConfig({ upstreams: [{ name: "up", base_url }] }, { env: {} });
    expect(createUpstreamState(config.upstreams[0]).secrets).toEqual([
      "api-version=2024-06-01-preview&sig=abc%2Fdef123&code=functionkey1&model=default-model",
      "api-version=2024-06-01-preview&sig=abc/def123&code=functionkey1&model=default-model",
      Buffer.from("bob:p@ss-word").toString("base64"),
      "abc%2Fdef123",
      "functionkey1",
      "p%40ss-word",
      "abc/def123",
      "p@ss-word",
    ]);
  });

  test("an api_key wins over a user and password", async () => {
    const heads: string[] = [];
    const port = recordingUpstream(heads);
    await callBoth(`http://bob:s3cret@127.0.0.1:${port}/v1`, { api_key: "sk-upstream-key-1234" });
    expect(heads.map((h) => header(h, "authorization"))).toEqual(["Bearer sk-upstream-key-1234", "Bearer sk-upstream-key-1234"]);
  });

  test("its query follows the endpoint's path, and its fragment is dropped", async () => {
    const heads: string[] = [];
    const port = recordingUpstream(heads);
    await callBoth(`http://127.0.0.1:${port}/openai/v1/?api-version=2024-06-01#ignored`);
    expect(heads.map((h) => h.split("\r\n")[0])).toEqual([
      "POST /openai/v1/chat/completions?api-version=2024-06-01 HTTP/1.1",
      "GET /openai/v1/models?api-version=2024-06-01 HTTP/1.1",
    ]);
  });
});
