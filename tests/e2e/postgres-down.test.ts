/**
 * The compiled binary on Postgres when Postgres goes away: a request that needs a read it cannot
 * make (a key not yet in the replica's cache) is answered 503 `service_unavailable` in OpenAI's
 * error shape, with a retry-after, before any upstream is called; /api/health still answers.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { startPostgres, type RunningPostgres } from "../support/postgres";

let pg: RunningPostgres | null = null;
let upstream: MockUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  pg = await startPostgres();
  upstream = startMockUpstream();
  gateway = await startGateway(
    `[database]
url = "env:DATABASE_URL"

[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }
`,
    { env: { DATABASE_URL: pg.url } },
  );
}, 60_000);

afterAll(async () => {
  await gateway?.stop("SIGKILL");
  upstream?.stop();
  await pg?.stop();
});

async function chat(key: string): Promise<Response> {
  return fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }] }),
  });
}

test("Postgres stopped: a request that must read it gets a 503 with a retry-after, not a 500, and no upstream call", async () => {
  const used = await createUserKey(gateway, { credits: "10" });
  const unused = await createUserKey(gateway, { credits: "10" });
  const served = await chat(used.key);
  expect(served.status).toBe(200);
  await served.arrayBuffer();
  const calls = upstream.chatCount();

  const stopping = pg!;
  pg = null;
  await stopping.stop();

  const refused = await chat(unused.key);
  expect(refused.status).toBe(503);
  expect(refused.headers.get("retry-after")).toBe("2");
  expect(refused.headers.get("x-request-id")).toBeTruthy();
  expect(await refused.json()).toEqual({
    error: { message: "The gateway's database cannot be reached; try again shortly", type: "api_error", param: null, code: "service_unavailable" },
  });
  expect(upstream.chatCount()).toBe(calls);
  expect((await fetch(`${gateway.url}/api/health`)).status).toBe(200);
  expect(gateway.output()).toContain('"msg":"database unreachable in /v1/chat/completions"');
}, 60_000);
