/**
 * End to end against the compiled binary: the official openai SDK through a failover route,
 * /metrics behind its token, and one structured JSON log line per request on stdout.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI from "openai";
import { createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { json, parseMetrics, sample } from "./helpers";

let gateway: RunningGateway;
let live: MockUpstream;
let broken: MockUpstream;

beforeAll(async () => {
  live = startMockUpstream();
  broken = startMockUpstream({ breakAfterChunks: 2, chunkDelayMs: 10 });
  gateway = await startGateway(
    `
[metrics]
token = "env:METRICS_TOKEN"

[routing]
retry_backoff_ms = 0

[[upstreams]]
name = "down"
base_url = "http://127.0.0.1:${freePort()}/v1"

[[upstreams]]
name = "live"
base_url = "${live.url}"

[[upstreams]]
name = "broken"
base_url = "${broken.url}"

[[models]]
id = "chat"
free = true
aliases = ["default"]
targets = [{ upstream = "down" }, { upstream = "live", model = "mock-small" }]

[[models]]
id = "flaky"
free = true
targets = [{ upstream = "broken" }, { upstream = "live" }]
`,
    { env: { METRICS_TOKEN: "prom-token-123" } },
  );
});

afterAll(async () => {
  await gateway?.stop();
  live?.stop();
  broken?.stop();
});

test("the openai SDK gets answers through failover; /metrics counts them; each request logs one JSON line", async () => {
  const { key: apiKey } = await createUserKey(gateway, { email: "router@modelgate.invalid", name: "router-test" });
  const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey, maxRetries: 0 });
  const { data, response } = await client.chat.completions.create({ model: "default", messages: [{ role: "user", content: "hi" }] }).withResponse();
  expect(data.choices[0].message.content).toBe("Hello from the mock upstream.");
  const requestId = response.headers.get("x-request-id")!;
  expect(requestId).toMatch(/^req_/);
  expect(response.headers.get("x-gateway-overhead-ms")).toMatch(/^\d+\.\d{2}$/);

  let text = "";
  for await (const chunk of await client.chat.completions.create({ model: "chat", messages: [{ role: "user", content: "hi" }], stream: true })) {
    text += chunk.choices[0]?.delta?.content ?? "";
  }
  expect(text).toBe("Hello from the mock upstream.");

  // A stream broken mid-answer surfaces as an error in the SDK, never as a silently short answer.
  let partial = "";
  const broke = (async () => {
    for await (const chunk of await client.chat.completions.create({ model: "flaky", messages: [{ role: "user", content: "hi" }], stream: true })) {
      partial += chunk.choices[0]?.delta?.content ?? "";
    }
  })();
  await expect(broke).rejects.toThrow(/broke/);
  expect(partial).toBe("Hello from");

  expect((await fetch(`${gateway.url}/metrics`)).status).toBe(401);
  const res = await fetch(`${gateway.url}/metrics`, { headers: { authorization: "Bearer prom-token-123" } });
  expect(res.status).toBe(200);
  const m = parseMetrics(await res.text());
  expect(sample(m, "modelgate_requests_total", { model: "chat", upstream: "live", identity: "api_key", status: "200" })).toBe(2);
  expect(sample(m, "modelgate_requests_total", { model: "flaky", upstream: "broken", status: "502" })).toBe(1);
  expect(sample(m, "modelgate_upstream_attempts_total", { upstream: "down", outcome: "failure" })).toBe(2);
  expect(sample(m, "modelgate_upstream_up", { upstream: "live" })).toBe(1);
  expect(sample(m, "modelgate_tokens_total", { model: "flaky", type: "completion" })).toBe(2);

  const status = await json(await fetch(`${gateway.url}/api/status`));
  expect(status.upstreams.find((u: { name: string }) => u.name === "down").last_error).toContain("unreachable");

  // Request lines are written in batches, shortly after the request.
  let line: Record<string, unknown> | undefined;
  for (let i = 0; i < 100 && !line; i++) {
    line = gateway
      .output()
      .split("\n")
      .filter((l) => l.includes(requestId))
      .map((l) => JSON.parse(l))[0];
    if (!line) await Bun.sleep(20);
  }
  expect(line).toMatchObject({ level: "info", msg: "request", request_id: requestId, identity: "api_key", model: "chat", upstream: "live", status: 200 });
  expect(gateway.output()).not.toContain("prom-token-123");
  expect(gateway.output()).not.toContain(apiKey);
});
