/**
 * Failover and retries with real mock upstreams over loopback: refused connections, 503s and
 * timeouts move to the next target before the first byte; nothing is retried after it.
 */
import { describe, expect, test } from "bun:test";
import { eventually } from "../support/eventually";
import { freePort } from "../support/binary";
import { HELLO, json, mockUpstreams, routerApp, sseData } from "./helpers";
import { recordFailure } from "../../src/router/upstream-health";

const mock = mockUpstreams();

function twoTargets(a: string, b: string, extra: Record<string, unknown> = {}, routing: Record<string, unknown> = {}) {
  return routerApp({
    upstreams: [
      { name: "a", base_url: a, ...extra },
      { name: "b", base_url: b, ...extra },
    ],
    models: [{ id: "m", free: true, targets: [{ upstream: "a" }, { upstream: "b" }] }],
    routing: { retry_backoff_ms: 0, ...routing },
  });
}

describe("failover before the first byte", () => {
  test("a refused connection moves on to the next target", async () => {
    const b = mock();
    const gw = twoTargets(`http://127.0.0.1:${freePort()}/v1`, b.url);
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(200);
    expect((await json(res)).choices[0].message.content).toBe("Hello from the mock upstream.");
    expect(b.chatCount()).toBe(1);
    expect(gw.records[0].upstream).toBe("b");
    const status = await json(await gw.request("/api/status"));
    const a = status.upstreams.find((u: { name: string }) => u.name === "a");
    expect(a.consecutive_failures).toBe(1);
    expect(a.last_error).toContain("unreachable");
  });

  test("a 503 moves on to the next target; the upstream model name is sent", async () => {
    const a = mock({ failWith: 503 });
    const b = mock();
    const gw = twoTargets(a.url, b.url);
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(200);
    expect(a.chatCount()).toBe(1);
    expect(b.chatCount()).toBe(1);
    expect(b.requests[0].body.model).toBe("m");
  });

  test("a 429 from an upstream moves on as well", async () => {
    const a = mock({ failWith: 429 });
    const b = mock();
    const res = await twoTargets(a.url, b.url).chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(200);
    expect(b.chatCount()).toBe(1);
  });

  test("an upstream refusing the gateway's own key (401, 403) or its own billing (402) moves on; alone, it is the gateway's 502, never a 401 or 402 the client would blame its key or balance for", async () => {
    for (const status of [401, 402, 403]) {
      const a = mock({ failWith: status });
      const b = mock();
      expect((await twoTargets(a.url, b.url).chat({ model: "m", messages: HELLO })).status).toBe(200);
      expect(b.chatCount()).toBe(1);
      b.behaviour.failWith = status;
      const res = await twoTargets(a.url, b.url, {}, { max_attempts: 2 }).chat({ model: "m", messages: HELLO });
      expect(res.status).toBe(502);
      const message =
        status === 402
          ? 'upstream "b" refused for its own billing (HTTP 402); check the account behind its api_key'
          : `upstream "b" refused the gateway's credentials (HTTP ${status}); check its api_key`;
      expect((await json(res)).error).toMatchObject({ code: "upstream_error", message });
    }
  });

  test("an upstream's redirect moves on; alone, it is the gateway's 502 naming base_url (regression: the 3xx reached the client without its Location)", async () => {
    const redirecting = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => new Response(null, { status: 301, headers: { location: "https://127.0.0.1:1/v1/chat/completions" } }),
    });
    try {
      const url = `http://127.0.0.1:${redirecting.port}/v1`;
      const b = mock();
      expect((await twoTargets(url, b.url).chat({ model: "m", messages: HELLO })).status).toBe(200);
      expect(b.chatCount()).toBe(1);
      const res = await twoTargets(url, url, {}, { max_attempts: 2 }).chat({ model: "m", messages: HELLO });
      expect(res.status).toBe(502);
      expect((await json(res)).error).toMatchObject({
        code: "upstream_error",
        message: 'upstream "b" answered 301, a redirect; check its base_url (https instead of http? a missing /v1?)',
      });
    } finally {
      redirecting.stop(true);
    }
  });

  test("an answer encoded although the gateway asked for none moves on; alone, a 502 naming it (regression: gzip bytes reached the client under a 200)", async () => {
    const body = Bun.gzipSync(JSON.stringify({ id: "x", object: "chat.completion", choices: [] }));
    const seen: Array<string | null> = [];
    const gzipping = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (request) => {
        seen.push(request.headers.get("accept-encoding"));
        return new Response(body, { headers: { "content-type": "application/json", "content-encoding": "gzip" } });
      },
    });
    try {
      const url = `http://127.0.0.1:${gzipping.port}/v1`;
      const b = mock();
      expect((await twoTargets(url, b.url).chat({ model: "m", messages: HELLO })).status).toBe(200);
      expect(b.chatCount()).toBe(1);
      expect(seen[0]).toBe("identity");
      const res = await twoTargets(url, url, {}, { max_attempts: 2 }).chat({ model: "m", messages: HELLO });
      expect(res.status).toBe(502);
      expect((await json(res)).error.message).toBe('upstream "b" answered with content-encoding gzip, though the gateway asked for none');
    } finally {
      gzipping.stop(true);
    }
  });

  test("a target whose circuit opened while an earlier attempt ran is skipped (regression: in-flight requests kept hitting it)", async () => {
    const b = mock();
    let gw!: ReturnType<typeof twoTargets>;
    // Target a fails slowly; meanwhile other requests' failures open b's circuit.
    const a = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async () => {
        const upstream = gw.deps.registry.upstreams.get("b")!;
        for (let i = 0; i < 3; i++) recordFailure(upstream, Date.now(), "failing elsewhere", gw.deps.config.routing);
        return new Response("{}", { status: 500 });
      },
    });
    try {
      gw = twoTargets(`http://127.0.0.1:${a.port}/v1`, b.url);
      const res = await gw.chat({ model: "m", messages: HELLO });
      expect(res.status).toBe(502);
      expect(b.chatCount()).toBe(0);
      expect((await json(res)).error.message).toBe('upstream "a" answered 500');
    } finally {
      a.stop(true);
    }
  });

  test("an upstream's refusal of the request is passed on, without the gateway's key for that upstream if it echoes it", async () => {
    const echo = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (request) =>
        Response.json({ error: { message: `bad request with ${request.headers.get("authorization")}`, type: "invalid_request_error" } }, { status: 400 }),
    });
    try {
      // The second key is one JSON escapes (its echo in a JSON body is not the key as written).
      for (const key of ["sk-upstream-secret-123", 'sk-up/9"Q\\zz+end']) {
        const gw = routerApp({
          upstreams: [{ name: "e", base_url: `http://127.0.0.1:${echo.port}/v1`, api_key: key }],
          models: [{ id: "m", free: true, targets: [{ upstream: "e" }] }],
        });
        for (const stream of [false, true]) {
          const res = await gw.chat({ model: "m", messages: HELLO, stream });
          expect(res.status).toBe(400);
          const text = await res.text();
          expect(text).not.toContain(JSON.stringify(key).slice(1, -1));
          expect(JSON.parse(text).error.message).toBe("bad request with Bearer [redacted]");
        }
      }
    } finally {
      echo.stop(true);
    }
  });

  test("when no upstream answers, the time spent waiting on them (and the backoff between rounds) is upstream time, not the gateway's overhead", async () => {
    const slow = mock({ delayMs: 1_000 });
    const gw = routerApp({
      upstreams: [{ name: "slow", base_url: slow.url, first_byte_timeout_ms: 150 }],
      models: [{ id: "m", free: true, targets: [{ upstream: "slow" }] }],
      routing: { max_attempts: 1 },
    });
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(504);
    const [record] = gw.records;
    expect(record.upstreamMs).toBeGreaterThanOrEqual(150);
    // Before, all of the wait showed as the gateway's own time (header, log line and histogram).
    expect(Number(res.headers.get("x-gateway-overhead-ms"))).toBeLessThan(record.upstreamMs / 2);
    expect(record.latencyMs - record.upstreamMs).toBeLessThan(record.upstreamMs / 2);

    const failing = mock({ failWith: 503 });
    const retried = routerApp({
      upstreams: [{ name: "f", base_url: failing.url }],
      models: [{ id: "m", free: true, targets: [{ upstream: "f" }] }],
      routing: { max_attempts: 3, retry_backoff_ms: 100, cooldown_failures: 10 },
    });
    expect((await retried.chat({ model: "m", messages: HELLO })).status).toBe(502);
    expect(retried.records[0].upstreamMs).toBeGreaterThanOrEqual(240); // 100 + 200 ms of backoff, less at most a fifth of jitter
  });

  test("a first-byte timeout moves on to the next target", async () => {
    const a = mock({ delayMs: 5_000 });
    const b = mock();
    const gw = twoTargets(a.url, b.url, { first_byte_timeout_ms: 100 });
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(200);
    expect(b.chatCount()).toBe(1);
    expect(gw.records[0].upstream).toBe("b");
  });

  test("first-byte timeouts stop the slow model alone, not every model on its upstream (regression: three slow anonymous requests took a whole box offline for 30 s)", async () => {
    const a = mock({ delayMs: 5_000 });
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url, first_byte_timeout_ms: 50 }],
      models: [
        { id: "big", free: true, targets: [{ upstream: "a", model: "llama-70b" }] },
        { id: "small", free: true, targets: [{ upstream: "a", model: "llama-8b" }] },
      ],
      routing: { max_attempts: 1, cooldown_failures: 3 },
    });
    for (let i = 0; i < 3; i++) expect((await gw.chat({ model: "big", messages: HELLO })).status).toBe(504);
    a.behaviour.delayMs = 0;
    expect((await gw.chat({ model: "small", messages: HELLO })).status).toBe(200);
    expect((await gw.chat({ model: "big", messages: HELLO })).status).toBe(503);
  });

  test("a probe of an upstream opened for broken connections that takes the connection but never answers leaves that circuit unclosed (regression: the slow answer closed it, and every model was readmitted)", async () => {
    const a = mock({ delayMs: 5_000 });
    let clock = 1_000_000;
    const gw = routerApp(
      {
        upstreams: [{ name: "a", base_url: a.url, first_byte_timeout_ms: 50 }],
        models: [{ id: "big", free: true, targets: [{ upstream: "a" }] }],
        routing: { max_attempts: 1, cooldown_failures: 3, cooldown_ms: 30_000 },
      },
      { now: () => clock },
    );
    const upstream = gw.deps.registry.upstreams.get("a")!;
    for (let i = 0; i < 3; i++) recordFailure(upstream, clock, "connection reset", gw.deps.config.routing);
    clock += 31_000; // the cooldown is over: the next request is the probe
    expect((await gw.chat({ model: "big", messages: HELLO })).status).toBe(504);
    expect(upstream.cooldownUntil).not.toBe(0);
    expect(upstream.probing).toBe(false);
  });

  test("a 400 from an upstream is the answer, not a reason to fail over", async () => {
    const a = mock({ failWith: 400 });
    const b = mock();
    const res = await twoTargets(a.url, b.url).chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(400);
    expect(b.chatCount()).toBe(0);
  });

  test("when every target fails: 502 in OpenAI's shape with request id and overhead headers", async () => {
    const a = mock({ failWith: 500 });
    const b = mock({ failWith: 503 });
    const gw = twoTargets(a.url, b.url);
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(502);
    const body = await json(res);
    // The last failure's reason, with what the upstream said (regression: its text was dropped).
    expect(body.error).toEqual({ message: 'upstream "a" answered 500: mock failure 500', type: "api_error", param: null, code: "upstream_error" });
    expect(gw.deps.registry.upstreams.get("b")!.lastError).toBe('upstream "b" answered 503: mock failure 503');
    expect(res.headers.get("x-request-id")).toMatch(/^req_/);
    expect(res.headers.get("x-gateway-overhead-ms")).toMatch(/^\d+\.\d{2}$/);
    expect(gw.records.map((r) => r.status)).toEqual([502]);
    // max_attempts = 3 over two targets: a, b, then a again.
    expect([a.chatCount(), b.chatCount()]).toEqual([2, 1]);
  });

  test("when every target times out: 504", async () => {
    const a = mock({ delayMs: 5_000 });
    const res = await routerApp({
      upstreams: [{ name: "a", base_url: a.url, first_byte_timeout_ms: 50 }],
      models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
    }).chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(504);
    expect((await json(res)).error.code).toBe("upstream_timeout");
    // A timed-out target is not tried again within the same request.
    expect(a.chatCount()).toBe(1);
  });

  test("retries are bounded by max_attempts, repeating a lone target after backoff", async () => {
    const a = mock({ failWith: 503 });
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url }],
      models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
      routing: { max_attempts: 3, retry_backoff_ms: 1, cooldown_failures: 10 },
    });
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(502);
    expect(a.chatCount()).toBe(3);
  });

  test("max_attempts = 1 never fails over", async () => {
    const a = mock({ failWith: 503 });
    const b = mock();
    const res = await twoTargets(a.url, b.url, {}, { max_attempts: 1 }).chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(502);
    expect(b.chatCount()).toBe(0);
  });
});

describe("after the first byte", () => {
  test("a stream that breaks is not retried: error event in OpenAI's shape, then [DONE], usage metered", async () => {
    const a = mock({ breakAfterChunks: 3, chunkDelayMs: 10 });
    const b = mock();
    const gw = twoTargets(a.url, b.url);
    const res = await gw.chat({ model: "m", messages: HELLO, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    expect(res.headers.get("x-gateway-overhead-ms")).toMatch(/^\d+\.\d{2}$/);
    const events = sseData(await res.text());
    expect(events.at(-1)).toBe("[DONE]");
    const error = JSON.parse(events.at(-2)!);
    expect(error.error).toMatchObject({ type: "api_error", code: "upstream_error", param: null });
    expect(error.error.message).toContain("broke");
    const content = events
      .slice(0, -2)
      .map((e) => JSON.parse(e).choices[0].delta.content)
      .join("");
    expect(content).toBe("Hello from the");
    expect(b.chatCount()).toBe(0);
    const [record] = gw.records;
    expect(record.status).toBe(502);
    expect(record.upstream).toBe("a");
    expect(record.promptTokens).toBeGreaterThan(0);
    expect(record.completionTokens).toBe(3);
    // The broken stream counts against the upstream's health.
    expect(gw.deps.registry.upstreams.get("a")!.consecutiveFailures).toBe(1);
  });

  test("a client that leaves mid-stream is recorded as 499, its usage so far metered, the upstream not blamed", async () => {
    const a = mock({ chunkDelayMs: 30, words: ["one ", "two ", "three ", "four ", "five ", "six "] });
    const gw = routerApp({ upstreams: [{ name: "a", base_url: a.url }], models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }] });
    const res = await gw.chat({ model: "m", messages: HELLO, stream: true });
    const reader = res.body!.getReader();
    await reader.read();
    await reader.cancel();
    expect(await eventually(() => gw.records.length === 1)).toBe(true);
    const [record] = gw.records;
    expect(record.status).toBe(499);
    expect(record.upstream).toBe("a");
    expect(record.completionTokens).toBeGreaterThan(0);
    expect(record.completionTokens).toBeLessThan(6);
    expect(gw.deps.registry.upstreams.get("a")!.consecutiveFailures).toBe(0);
  });

  test("streams that always break after their headers open the circuit after cooldown_failures (regression: the headers reset the count)", async () => {
    const a = mock({ breakAfterChunks: 1, chunkDelayMs: 5 });
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url }],
      models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
      routing: { cooldown_failures: 3, cooldown_ms: 60_000 },
    });
    for (let i = 0; i < 3; i++) await (await gw.chat({ model: "m", messages: HELLO, stream: true })).text();
    const upstream = gw.deps.registry.upstreams.get("a")!;
    expect(upstream.consecutiveFailures).toBe(3);
    expect([upstream.successes, upstream.failures]).toEqual([0, 3]);
    const refused = await gw.chat({ model: "m", messages: HELLO, stream: true });
    expect(refused.status).toBe(503);
    expect(a.chatCount()).toBe(3);
    a.behaviour.breakAfterChunks = undefined;
  });

  test("a whole answer ends a run of failures", async () => {
    const a = mock({ breakAfterChunks: 1, chunkDelayMs: 5 });
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url }],
      models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
      routing: { cooldown_failures: 3 },
    });
    for (let i = 0; i < 2; i++) await (await gw.chat({ model: "m", messages: HELLO, stream: true })).text();
    a.behaviour.breakAfterChunks = undefined;
    await (await gw.chat({ model: "m", messages: HELLO, stream: true })).text();
    expect(await (await gw.chat({ model: "m", messages: HELLO })).json()).toHaveProperty("choices");
    const upstream = gw.deps.registry.upstreams.get("a")!;
    expect([upstream.consecutiveFailures, upstream.successes, upstream.failures]).toEqual([0, 2, 2]);
  });

  test("a stream that stalls ends after idle_timeout_ms with the error event and [DONE]", async () => {
    const a = mock({ stallAfterChunks: 2 });
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url, idle_timeout_ms: 100 }],
      models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
    });
    const events = sseData(await (await gw.chat({ model: "m", messages: HELLO, stream: true })).text());
    expect(events.at(-1)).toBe("[DONE]");
    expect(JSON.parse(events.at(-2)!).error.message).toContain("sent nothing for 100 ms");
    expect(gw.records[0].status).toBe(502);
    expect(gw.records[0].completionTokens).toBe(2);
  });

  test("a complete stream keeps upstream usage and drops the usage chunk the client did not ask for", async () => {
    const a = mock();
    const gw = routerApp({ upstreams: [{ name: "a", base_url: a.url }], models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }] });
    const events = sseData(await (await gw.chat({ model: "m", messages: HELLO, stream: true })).text());
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.some((e) => e.includes('"usage":{'))).toBe(false);
    expect(a.requests[0].body.stream_options).toEqual({ include_usage: true });
    expect(gw.records[0]).toMatchObject({ status: 200, completionTokens: 6 });
  });
});
