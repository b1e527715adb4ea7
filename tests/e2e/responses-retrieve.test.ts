/**
 * GET /v1/responses/{id} on the compiled binary over loopback, admitted as the other /v1 routes
 * are: a read costs one request of the key's limit (429 past it), a key's address allowlist
 * refuses another address (403 ip_not_allowed), CORS headers go on its answers when
 * server.cors_origins lets the page's origin in, and each read is a request-log row (endpoint
 * "responses", no tokens, no credits).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

const ORIGIN = "https://chat.example";
let mock: MockUpstream;
let gw: RunningGateway;

beforeAll(async () => {
  mock = startMockUpstream();
  gw = await startGateway(`
[server]
cors_origins = ["${ORIGIN}"]

[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "small"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1, completion = 2 }
`);
});

afterAll(async () => {
  await gw?.stop();
  mock?.stop();
});

async function cli(args: string[]): Promise<void> {
  const result = await gw.cli(args);
  if (result.code !== 0) throw new Error(`modelgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
}

/** Waits out the server's change poll (50 ms), so a CLI change is seen by the next request. */
const seen = (): Promise<void> => Bun.sleep(200);

const read = (key: string, id: string, headers: Record<string, string> = {}): Promise<Response> =>
  fetch(`${gw.url}/v1/responses/${id}`, { headers: { authorization: `Bearer ${key}`, ...headers } });

describe("GET /v1/responses/{id} through the gateway's limits", () => {
  test("a read costs one request of the key's limit: past it, 429 with retry-after", async () => {
    const { key, id } = await createUserKey(gw, { credits: "10" });
    await cli(["key", "update", id, "--per-minute", "2"]);
    await seen();
    const first = await read(key, "resp_unknown");
    expect(first.status).toBe(404);
    expect(first.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    expect((await read(key, "resp_unknown")).status).toBe(404);
    const limited = await read(key, "resp_unknown");
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  test("a key with an address allowlist, from another address: 403 ip_not_allowed", async () => {
    const { key, id } = await createUserKey(gw, { credits: "10" });
    await cli(["key", "update", id, "--allow-ip", "10.0.0.0/8"]);
    await seen();
    const refused = await read(key, "resp_unknown");
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("ip_not_allowed");
  });

  test("CORS headers on a stored response and on a refusal, for an origin cors_origins lists; a row per read, no tokens, no credits", async () => {
    const { key } = await createUserKey(gw, { credits: "10" });
    const created = await fetch(`${gw.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: "small", input: "hi" }),
    });
    expect(created.status).toBe(200);
    const stored = (await created.json()) as { id: string };
    const found = await read(key, stored.id, { origin: ORIGIN });
    expect(found.status).toBe(200);
    expect(((await found.json()) as { id: string }).id).toBe(stored.id);
    expect(found.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    const requestId = found.headers.get("x-request-id");
    expect(requestId).toBeTruthy();
    const missing = await read(key, "resp_unknown", { origin: ORIGIN });
    expect(missing.status).toBe(404);
    expect(missing.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    const anonymous = await fetch(`${gw.url}/v1/responses/${stored.id}`, { headers: { origin: ORIGIN } });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("access-control-allow-origin")).toBe(ORIGIN);
    // The request log is written behind (every 100 ms).
    await Bun.sleep(500);
    const db = new Database(join(gw.dir, "data", "modelgate.db"), { readonly: true });
    try {
      const row = db
        .query<{ endpoint: string; status: number; tokens: number; cost: number; model: string }, [string]>(
          "SELECT endpoint, status, prompt_tokens + completion_tokens AS tokens, cost_micro AS cost, model FROM request_log WHERE request_id = ?",
        )
        .get(requestId!);
      expect(row).toEqual({ endpoint: "responses", status: 200, tokens: 0, cost: 0, model: "" });
    } finally {
      db.close();
    }
  });
});
