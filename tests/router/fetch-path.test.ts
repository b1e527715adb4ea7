/**
 * Upstreams reached through fetch (https ones, and every one when HTTP_PROXY is set), end to end
 * against the compiled binary: a raw loopback proxy in HTTP_PROXY answers for the upstream with
 * the bytes each test chooses. Regressions: fetch's own error text, which quotes the URL and any
 * key in base_url's query, reached the client's 502 and /api/status; and a 2xx answer framed by
 * the connection's close and cut short of its JSON was relayed as a 200.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { TCPSocketListener } from "bun";
import { startGateway, type RunningGateway } from "../support/binary";

const SECRET = "QUERYSECRET0123456789";
const WHOLE = JSON.stringify({ id: "c1", object: "chat.completion", choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
const ASK = JSON.stringify({ model: "far", messages: [{ role: "user", content: "hi" }] });

let answer = "";
let proxy: TCPSocketListener;
let gateway: RunningGateway;

beforeAll(async () => {
  proxy = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (socket) => void socket.end(answer) } });
  gateway = await startGateway(
    `
[routing]
max_attempts = 1
cooldown_failures = 1000

[[upstreams]]
name = "far"
base_url = "http://models.example.invalid/v1?key=${SECRET}"

[[models]]
id = "far"
free = true
targets = [{ upstream = "far" }]
`,
    { env: { HTTP_PROXY: `http://127.0.0.1:${proxy.port}` } },
  );
});

afterAll(async () => {
  await gateway?.stop();
  proxy?.stop(true);
});

async function ask(upstreamAnswer: string): Promise<{ status: number; text: string }> {
  answer = upstreamAnswer;
  const res = await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: ASK });
  return { status: res.status, text: await res.text() };
}

describe("an upstream reached through fetch", () => {
  test("a malformed answer is a 502 in the gateway's words, with fetch's code and without base_url's key, in the answer, /api/status and the log", async () => {
    const { status, text } = await ask(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\ncontent-length: 9\r\n\r\n{"ok":1}`);
    expect(status).toBe(502);
    expect(JSON.parse(text).error).toMatchObject({ code: "upstream_error", message: 'upstream "far" failed before its answer arrived (InvalidContentLength)' });
    const state = await (await fetch(`${gateway.url}/api/status`)).text();
    expect(state).toContain("InvalidContentLength");
    for (const seen of [text, state, gateway.output()]) {
      expect(seen).not.toContain(SECRET);
      expect(seen).not.toContain("models.example.invalid");
    }
  });

  test("a 2xx answer framed by the connection's close and cut short of its JSON is a 502; whole, it is the answer", async () => {
    const head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n";
    const cut = await ask(head + WHOLE.slice(0, 30));
    expect(cut.status).toBe(502);
    expect(JSON.parse(cut.text).error.message).toBe('upstream "far" closed the connection before its answer was whole');
    expect(await ask(head + WHOLE)).toEqual({ status: 200, text: WHOLE });
    expect(await ask(`HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${WHOLE.length}\r\n\r\n${WHOLE}`)).toEqual({
      status: 200,
      text: WHOLE,
    });
  });
});
