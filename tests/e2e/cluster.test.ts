/**
 * Three replicas of the compiled binary sharing one SQLite file and one Redis (`[cluster]
 * redis_url`), behind a round-robin balancer: limits stay exact across them, a key revoked through
 * one is refused by the others within a second, a SpendAuth header served by one is a replay at
 * another (also one that restarted meanwhile, which forgets its own unsettled records), and with
 * Redis stopped every replica refuses with a 503 (never unlimited) and recovers when it returns.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { startRedis, type RunningRedis } from "../support/redis";
import { startRoundRobin, type RoundRobin } from "../support/round-robin";
import { payWithHeader } from "../support/paid-load";
import { SPEND_AUTH_TOML, signedHeader } from "../spendauth/helpers";

let redis: RunningRedis;
let upstream: MockUpstream;
let held: MockUpstream;
let release: () => void;
let dir: string;
let config: string;
const replicas: RunningGateway[] = [];
let balancer: RoundRobin;

const CHAT = { model: "free-model", messages: [{ role: "user", content: "hi" }] };

beforeAll(async () => {
  redis = await startRedis();
  upstream = startMockUpstream();
  held = startMockUpstream({ holdUntil: new Promise<void>((resolve) => (release = resolve)) });
  dir = mkdtempSync(join(tmpdir(), "modelgate-cluster-"));
  // The daily window beside the default 60 a minute holds the count still while a burst takes more
  // than a second to arrive on a loaded machine (the bucket refills one a second); replicas
  // counting each on their own would let 180 through either way.
  config = `
[cluster]
redis_url = "env:TEST_REDIS_URL"

[limits]
api_key = { per_minute = 60, per_day = 60 }

[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[upstreams]]
name = "held"
base_url = "${held.url}"

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }

[[models]]
id = "paid-held"
targets = [{ upstream = "held", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }

${SPEND_AUTH_TOML}`;
  // One after another: each writes the shared directory's config file, then reads it at start.
  for (let i = 0; i < 3; i++) replicas.push(await startGateway(config, { dir, env: { TEST_REDIS_URL: redis.url } }));
  balancer = await startRoundRobin(replicas.map((r) => r.url));
}, 60_000);

afterAll(async () => {
  release?.();
  await balancer?.stop();
  for (const replica of replicas) if (replica.proc.exitCode === null) await replica.stop("SIGKILL");
  upstream?.stop();
  held?.stop();
  await redis?.stop();
});

function chat(url: string, key: string): Promise<Response> {
  return fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(CHAT),
  });
}

describe("three replicas sharing Redis", () => {
  test("1,000 simultaneous requests on a fresh key, spread over the replicas, let exactly 60 through (60 a minute, 60 a day)", async () => {
    const { key } = await createUserKey(replicas[0], { email: "burst@example.com" });
    const before = upstream.chatCount();
    const responses = await Promise.all(
      Array.from({ length: 1_000 }, async () => {
        const response = await chat(balancer.url, key);
        return {
          status: response.status,
          remaining: response.headers.get("x-ratelimit-remaining-requests"),
          retryAfter: response.headers.get("retry-after"),
          body: await response.text(),
        };
      }),
    );
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok).toHaveLength(60);
    expect(limited).toHaveLength(940);
    expect(upstream.chatCount() - before).toBe(60);
    expect(ok.map((r) => Number(r.remaining)).sort((a, b) => a - b)).toEqual(Array.from({ length: 60 }, (_, i) => i));
    for (const r of limited) {
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(JSON.parse(r.body).error.code).toBe("rate_limit_exceeded");
    }
  }, 60_000);

  test("a key revoked through one replica is refused by the others within a second", async () => {
    const { key, id } = await createUserKey(replicas[0], { email: "revoked@example.com" });
    // Each replica has verified the key and holds it in its cache.
    for (const replica of replicas) expect((await chat(replica.url, key)).status).toBe(200);
    const revoked = await replicas[0].cli(["key", "revoke", id]);
    expect(revoked.code).toBe(0);
    const deadline = Date.now() + 1_000;
    for (const replica of replicas.slice(1)) {
      let status = 0;
      while (Date.now() < deadline) {
        status = (await chat(replica.url, key)).status;
        if (status === 401) break;
        await Bun.sleep(20);
      }
      expect(status).toBe(401);
    }
  });

  test("a SpendAuth header served by one replica is a replay at another", async () => {
    const value = await signedHeader({ nonce: 100n, amount: 10_000_000n });
    const body = { model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 20 };
    expect(await payWithHeader(replicas[0], { value, body })).toEqual({ status: 200, code: null });
    for (const replica of replicas.slice(1)) expect(await payWithHeader(replica, { value, body })).toEqual({ status: 401, code: "nonce_replay" });
  });

  test("a header still being answered by one replica is a replay at another that restarted meanwhile", async () => {
    const value = await signedHeader({ nonce: 200n, amount: 10_000_000n });
    const pending = payWithHeader(replicas[0], { value, body: { model: "paid-held", messages: [{ role: "user", content: "hello" }], max_tokens: 20 } });
    while (held.chatCount() === 0) await Bun.sleep(10);
    // Restarting, a replica forgets the records no settlement row claims yet: this one's among them.
    await replicas[1].stop();
    replicas[1] = await startGateway(config, { dir, env: { TEST_REDIS_URL: redis.url } });
    const replayed = await payWithHeader(replicas[1], { value, body: { model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 20 } });
    release();
    expect(await pending).toEqual({ status: 200, code: null });
    expect(replayed).toEqual({ status: 401, code: "nonce_replay" });
  }, 30_000);

  test("Redis stopped: 503 with Retry-After and /api/status degraded, never unlimited; back by itself when Redis returns", async () => {
    const { key } = await createUserKey(replicas[0], { email: "outage@example.com" });
    await redis.stop();
    // Straight to each replica: one was restarted above, on a port the balancer does not know.
    const statuses = await Promise.all(
      Array.from({ length: 90 }, async (_, i) => {
        const response = await chat(replicas[i % 3].url, key);
        const body = (await response.json()) as { error?: { code: string; type: string } };
        return { status: response.status, retryAfter: response.headers.get("retry-after"), code: body.error?.code };
      }),
    );
    expect(statuses.filter((s) => s.status === 200)).toHaveLength(0);
    for (const s of statuses) expect(s).toEqual({ status: 503, retryAfter: "1", code: "service_unavailable" });
    const status = (await (await fetch(`${replicas[2].url}/api/status`)).json()) as { status: string; cluster: { redis: string } };
    expect(status).toMatchObject({ status: "degraded", cluster: { redis: "down" } });
    expect((await fetch(`${replicas[2].url}/api/health`)).status).toBe(200);
    expect(replicas[2].output()).toContain("stopped answering; requests are refused (503)");

    await redis.start();
    for (const replica of replicas) {
      const deadline = Date.now() + 10_000;
      let answered = 0;
      while (Date.now() < deadline && (answered = (await chat(replica.url, key)).status) !== 200) await Bun.sleep(50);
      expect(answered).toBe(200);
    }
    const recovered = (await (await fetch(`${replicas[2].url}/api/status`)).json()) as { status: string; cluster: { redis: string } };
    expect(recovered.cluster.redis).toBe("up");
    expect(replicas[2].output()).toContain("is back; shared rate limits apply again");
  }, 60_000);
});

describe("a replica started while Redis is down", () => {
  test("starts, refuses with 503 until Redis answers, then serves without a restart", async () => {
    const later = await startRedis();
    await later.stop();
    const gw = await startGateway(
      `[cluster]\nredis_url = "${later.url}"\n[[upstreams]]\nname = "mock"\nbase_url = "${upstream.url}"\n[[models]]\nid = "free-model"\nfree = true\ntargets = [{ upstream = "mock", model = "mock-small" }]\n`,
    );
    try {
      const { key } = await createUserKey(gw, { email: "early@example.com" });
      expect((await chat(gw.url, key)).status).toBe(503);
      expect(gw.output()).toContain("cannot be reached");
      await later.start();
      const deadline = Date.now() + 10_000;
      let status = 0;
      while (Date.now() < deadline && (status = (await chat(gw.url, key)).status) !== 200) await Bun.sleep(50);
      expect(status).toBe(200);
    } finally {
      await gw.stop();
      await later.stop();
    }
  }, 30_000);
});
