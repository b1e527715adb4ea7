/**
 * One front door: a model endpoint answers alike whichever way a request reaches it on the
 * compiled binary (the server's own route, or the app behind it, as a path with a trailing slash
 * does): refusals carry the same headers and are recorded alike.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let mock: MockUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  mock = startMockUpstream();
  gw = await startGateway(`
[server]
max_body_bytes = 2048
[metrics]
enabled = true
[[upstreams]]
name = "mock"
base_url = "${mock.url}"
[[models]]
id = "m"
free = true
targets = [{ upstream = "mock" }]
`);
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
});

describe("one front door", () => {
  test("an oversized chat body is answered and recorded alike with and without a trailing slash", async () => {
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "x".repeat(4096) }] });
    const answers = [];
    for (const path of ["/v1/chat/completions", "/v1/chat/completions/"]) {
      const res = await fetch(`${gw.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
      answers.push({
        status: res.status,
        code: ((await res.json()) as { error: { code: string } }).error.code,
        overhead: res.headers.has("x-gateway-overhead-ms"),
      });
    }
    expect(answers).toEqual([
      { status: 413, code: "payload_too_large", overhead: true },
      { status: 413, code: "payload_too_large", overhead: true },
    ]);
    const metrics = await (await fetch(`${gw.url}/metrics`)).text();
    const refused = metrics.split("\n").filter((line) => line.startsWith("modelgate_requests_total{") && line.includes('status="413"'));
    expect(refused.map((line) => Number(line.split(" ").at(-1))).reduce((a, b) => a + b, 0)).toBe(2);
  });
});
