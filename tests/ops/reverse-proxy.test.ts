/**
 * The reverse-proxy examples (examples/nginx/modelgate.conf, examples/caddy/Caddyfile), run by
 * Debian's nginx and caddy in front of the compiled binary with the examples' modelgate.toml
 * settings (`trusted_proxies = ["127.0.0.1"]`): a stream reaches the official SDK event by event,
 * the gateway counts clients by the address the proxy forwards, and a body over the limit is
 * refused with 413. Only the proxy's listen address and the gateway's port differ from the files.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import http from "node:http";
import OpenAI from "openai";
import { createUserKey, startGateway, type RunningGateway, type UserKey } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { ensureReverseProxies, startCaddy, startNginx, type RunningProxy } from "../support/reverse-proxy";

const WORDS = ["One", " two", " three", " four"];
const MAX_BODY_BYTES = 10 * 1024 * 1024;

let upstream: MockUpstream;
let gateway: RunningGateway;
let user: UserKey;

beforeAll(async () => {
  ensureReverseProxies();
  upstream = startMockUpstream({ words: WORDS });
  gateway = await startGateway(`
[server]
trusted_proxies = ["127.0.0.1"]

[limits]
anonymous = { per_minute = 1, per_day = 1000 }

[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`);
  user = await createUserKey(gateway);
});

afterAll(async () => {
  await gateway?.stop();
  upstream?.stop();
});

/** A chat request sent from `localAddress` (any 127.0.0.0/8 address is this machine's), without a key. */
function anonymousChat(url: string, options: { localAddress: string; body?: string }): Promise<{ status: number; body: string }> {
  const body = options.body ?? JSON.stringify({ model: "free-model", messages: [{ role: "user", content: "hi" }] });
  return new Promise((resolve, reject) => {
    const target = new URL("/v1/chat/completions", url);
    const request = http.request(
      {
        host: target.hostname,
        port: target.port,
        path: target.pathname,
        method: "POST",
        localAddress: options.localAddress,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
      },
      (response) => {
        let text = "";
        response.on("data", (chunk) => (text += chunk));
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }));
      },
    );
    request.on("error", reject);
    request.end(body);
  });
}

/**
 * Each proxy, which of the two refuses a 12 MiB body (nginx, past its client_max_body_size; the
 * Caddy example sets no limit, so the gateway), and the first of the client addresses its tests
 * send from (127.0.0.N).
 */
const proxies: Array<[string, (options: { gatewayPort: number }) => Promise<RunningProxy>, "proxy" | "gateway", number]> = [
  ["nginx", startNginx, "proxy", 10],
  ["caddy", startCaddy, "gateway", 20],
];

describe.each(proxies)("%s in front of the gateway", (_name, start, refusesHuge, firstClient) => {
  const client = (n: number): string => `127.0.0.${firstClient + n}`;
  let proxy: RunningProxy;
  beforeAll(async () => {
    proxy = await start({ gatewayPort: gateway.port });
  });
  afterAll(async () => {
    await proxy?.stop();
  });

  test("a stream arrives event by event: the first while the upstream still holds the rest", async () => {
    let release = (): void => {};
    upstream.behaviour.stallAfterChunks = 1;
    upstream.behaviour.stallUntil = new Promise<void>((resolve) => (release = resolve));
    try {
      const openai = new OpenAI({ baseURL: `${proxy.url}/v1`, apiKey: user.key, maxRetries: 0 });
      const stream = await openai.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "count" }], stream: true });
      const iterator = stream[Symbol.asyncIterator]();
      const first = await iterator.next();
      // The upstream has sent one chunk and sends nothing more until released: a proxy that
      // buffered the answer would never hand this one over.
      expect(first.value?.choices[0].delta.content).toBe(WORDS[0]);
      release();
      let rest = "";
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) rest += next.value.choices[0]?.delta.content ?? "";
      expect(WORDS[0] + rest).toBe(WORDS.join(""));
    } finally {
      release();
      upstream.behaviour.stallAfterChunks = undefined;
      upstream.behaviour.stallUntil = undefined;
    }
  });

  test("clients behind the proxy are counted by the address it forwards, not the proxy's", async () => {
    // One anonymous request a minute per address. Without X-Forwarded-For from a trusted proxy,
    // every client would be the proxy's 127.0.0.1 and the third request would be refused too.
    expect((await anonymousChat(proxy.url, { localAddress: client(0) })).status).toBe(200);
    expect((await anonymousChat(proxy.url, { localAddress: client(0) })).status).toBe(429);
    expect((await anonymousChat(proxy.url, { localAddress: client(1) })).status).toBe(200);
  });

  test(`a body over server.max_body_bytes gets the gateway's 413; one of 12 MiB, the ${refusesHuge}'s`, async () => {
    const padded = (size: number): string => JSON.stringify({ model: "free-model", messages: [{ role: "user", content: "x".repeat(size) }] });
    const overGateway = await anonymousChat(proxy.url, { localAddress: client(2), body: padded(MAX_BODY_BYTES) });
    expect(overGateway.status).toBe(413);
    expect(JSON.parse(overGateway.body).error.code).toBe("payload_too_large");
    const huge = await anonymousChat(proxy.url, { localAddress: client(3), body: padded(12 * 1024 * 1024) });
    expect(huge.status).toBe(413);
    if (refusesHuge === "gateway") expect(JSON.parse(huge.body).error.code).toBe("payload_too_large");
    else expect(huge.body).toContain("413 Request Entity Too Large");
  });
});
