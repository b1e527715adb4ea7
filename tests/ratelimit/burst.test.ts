/**
 * Rate limits through the whole pipeline: a real concurrent burst over loopback against the
 * compiled binary, and (in process, with an injected clock) the anonymous per-minute and daily
 * limits and a per-key override.
 */
import { buildConfig } from "../../src/config/load";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { buildAuthApp, type AuthTestApp, jsonOf } from "../auth/support";

describe("a burst of 1,000 simultaneous requests on one fresh key (compiled binary, loopback)", () => {
  let upstream: MockUpstream;
  let gw: RunningGateway;
  beforeAll(async () => {
    upstream = startMockUpstream();
    gw = await startGateway(
      `[[upstreams]]\nname = "mock"\nbase_url = "${upstream.url}"\n[[models]]\nid = "free-model"\nfree = true\ntargets = [{ upstream = "mock", model = "mock-small" }]\n`,
    );
  });
  afterAll(async () => {
    await gw.stop();
    upstream.stop();
  });

  test("lets exactly 60 through; the rest get 429 rate_limit_exceeded with Retry-After", async () => {
    const { key } = await createUserKey(gw, { email: "burst@example.com" });
    const body = JSON.stringify({ model: "free-model", messages: [{ role: "user", content: "hi" }] });
    const responses = await Promise.all(
      Array.from({ length: 1000 }, async () => {
        const response = await fetch(`${gw.url}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body,
        });
        return { status: response.status, headers: response.headers, body: await response.text() };
      }),
    );
    const ok = responses.filter((r) => r.status === 200);
    const limited = responses.filter((r) => r.status === 429);
    expect(ok).toHaveLength(60);
    expect(limited).toHaveLength(940);
    expect(upstream.chatCount()).toBe(60);
    const remaining = ok.map((r) => Number(r.headers.get("x-ratelimit-remaining-requests"))).sort((a, b) => a - b);
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => i));
    for (const r of limited) {
      expect(r.headers.get("retry-after")).toBe("1");
      expect(r.headers.get("x-ratelimit-limit-requests")).toBe("60");
      expect(r.headers.get("x-ratelimit-remaining-requests")).toBe("0");
      expect(JSON.parse(r.body).error).toMatchObject({ code: "rate_limit_exceeded", type: "rate_limit_error" });
    }
  });
});

describe("in process, with an injected clock", () => {
  let t: AuthTestApp;
  afterEach(() => t?.close());
  const free = { model: "free-model", messages: [{ role: "user", content: "hi" }] };

  test("anonymous: 10 a minute, 5 a day per address, then 429 until the day is over", async () => {
    t = buildAuthApp();
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await t.chat(free)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    const denied = await t.chat(free);
    expect(denied.headers.get("x-ratelimit-limit-requests")).toBe("5");
    expect(denied.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(denied.headers.get("x-ratelimit-reset-requests")).toBe("24h0m0s");
    expect(denied.headers.get("retry-after")).toBe("86400");
    expect((await jsonOf(denied)).error.message).toContain("5 requests per day");
    t.clock.advance(86_400_000 - 1);
    expect((await t.chat(free)).status).toBe(429);
    t.clock.advance(1);
    const next = await t.chat(free);
    expect(next.status).toBe(200);
    expect(next.headers.get("x-ratelimit-remaining-requests")).toBe("4");
  });

  test("a request answered 503 because every upstream is cooling down gives its request back; attempts that reached an upstream count (regression: an anonymous caller following Retry-After through an outage used up its day)", async () => {
    t = buildAuthApp();
    t.upstream.behaviour.failWith = 500;
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await t.chat(free)).status);
    // The first request's three attempts open the circuit (cooldown_failures); the 503s after it tried no upstream.
    expect(statuses).toEqual([502, ...Array(8).fill(503)]);
    t.upstream.behaviour.failWith = undefined;
    t.clock.advance(30_000); // cooldown_ms: the upstream is tried again
    const served = await t.chat(free);
    expect(served.status).toBe(200);
    expect(served.headers.get("x-ratelimit-remaining-requests")).toBe("3"); // 5 a day: the 502 and this one
    for (let i = 0; i < 3; i++) expect((await t.chat(free)).status).toBe(200);
    expect((await t.chat(free)).status).toBe(429);
  });

  test("IPv6 callers are limited per /64: another address of the same block is the same caller", async () => {
    t = buildAuthApp({ server: { trusted_proxies: ["127.0.0.1"] } });
    const from = (address: string) => ({ "x-forwarded-for": address });
    const statuses: number[] = [];
    for (let i = 1; i <= 6; i++) statuses.push((await t.chat(free, from(`2001:db8:1:2::${i.toString(16)}`))).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect((await t.chat(free, from("2001:db8:1:3::1"))).status).toBe(200);
    expect((await t.chat(free, from("2001:DB8:1:2:ffff:ffff:ffff:ffff"))).status).toBe(429);
  });

  test("per_day = 0 turns the anonymous daily window off; a key left out keeps its default", async () => {
    t = buildAuthApp({ limits: { anonymous: { per_minute: 8, per_day: 0 } } });
    const statuses: number[] = [];
    for (let i = 0; i < 9; i++) statuses.push((await t.chat(free)).status);
    expect(statuses).toEqual([...Array(8).fill(200), 429]);
    expect(buildConfig({ limits: { anonymous: { per_minute: 100 } } }, { env: {} }).config.limits.anonymous).toEqual({ per_minute: 100, per_day: 5 });
  });

  test("a [limits] entry with an unknown key or a limit past 1,000,000,000 is a config error", () => {
    expect(() => buildConfig({ limits: { api_key: { per_minute: 3, per_dya: 1 } } }, { env: {} })).toThrow("limits.api_key.per_dya: unknown key");
    expect(() => buildConfig({ limits: { api_key: { per_minute: 1e300 } } }, { env: {} })).toThrow("limits.api_key.per_minute");
    expect(() => buildConfig({ limits: { anonymous: { per_minute: 10, per_day: -1 } } }, { env: {} })).toThrow("limits.anonymous.per_day");
  });

  test("anonymous per-minute limit binds first when it is the tighter", async () => {
    t = buildAuthApp({ limits: { anonymous: { per_minute: 2, per_day: 100 } } });
    expect([await t.chat(free), await t.chat(free), await t.chat(free)].map((r) => r.status)).toEqual([200, 200, 429]);
    const limited = await t.chat(free);
    expect(limited.headers.get("retry-after")).toBe("30");
    expect((await jsonOf(limited)).error.message).toContain("2 requests per minute");
    t.clock.advance(30_000);
    expect((await t.chat(free)).status).toBe(200);
  });

  test("anonymous callers on a paid model get 401 naming the ways to authenticate, and use no quota", async () => {
    t = buildAuthApp();
    const response = await t.chat({ ...free, model: "paid-model" });
    expect(response.status).toBe(401);
    expect((await jsonOf(response)).error.message).toMatch(/API key .* session/);
    expect(t.identities.limiter.size()).toBe(0);
  });

  test("a per-key override (api_keys.per_minute) replaces the default", async () => {
    t = buildAuthApp();
    const user = await t.user("small@example.com");
    const auth = { authorization: `Bearer ${await t.key(user.id, { perMinute: 3 })}` };
    const statuses = await Promise.all(Array.from({ length: 10 }, () => t.chat(free, auth).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
  });

  test("sessions: 30 a minute per user, shared by all of the user's sessions", async () => {
    t = buildAuthApp();
    const user = await t.user("web@example.com");
    const a = { cookie: `mg_session=${await t.session(user.id)}` };
    const b = { cookie: `mg_session=${await t.session(user.id)}` };
    const statuses = await Promise.all(Array.from({ length: 40 }, (_, i) => t.chat(free, i % 2 ? a : b).then((r) => r.status)));
    expect(statuses.filter((s) => s === 200)).toHaveLength(30);
  });
});
