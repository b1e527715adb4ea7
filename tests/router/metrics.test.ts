/**
 * /metrics counters move with traffic (parsed from the Prometheus text), the bearer token guards
 * the endpoint when set, and request log lines are batched, filtered by level and carry no secret.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors";
import type { Gate } from "../../src/auth/types";
import { createLogger } from "../../src/log";
import type { RequestRecord } from "../../src/requests/record";
import { Counter } from "../../src/metrics/exposition";
import { discoverOnce } from "../../src/router/discover";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { HELLO, parseMetrics, routerApp, sample } from "./helpers";

const mocks: MockUpstream[] = [];
afterEach(() => {
  while (mocks.length) mocks.pop()!.stop();
});

function gateway(options: { token?: string; gate?: Gate } = {}) {
  const a = startMockUpstream({ failWith: 503 });
  const b = startMockUpstream();
  mocks.push(a, b);
  const gw = routerApp(
    {
      upstreams: [
        { name: "a", base_url: a.url },
        { name: "b", base_url: b.url },
      ],
      models: [{ id: "m", price: { prompt: 1_000, completion: 2_000 }, targets: [{ upstream: "a" }, { upstream: "b" }] }],
      routing: { retry_backoff_ms: 0, max_attempts: 2, cooldown_failures: 100 },
      metrics: options.token ? { token: options.token } : {},
    },
    { gate: options.gate },
  );
  return { a, b, gw };
}

async function scrape(gw: ReturnType<typeof routerApp>, headers: Record<string, string> = {}): Promise<Map<string, number>> {
  const res = await gw.request("/metrics", { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain; version=0.0.4");
  return parseMetrics(await res.text());
}

describe("/metrics", () => {
  test("credits are shown divided, not multiplied by 1e-6 (regression: 200,000 micro-credits read 0.19999999999999998)", () => {
    const credits = new Counter("modelgate_credits_total", "Credits charged.", ["model"]);
    credits.inc(["m"], 200_000);
    expect(credits.render(1_000_000)).toContain('modelgate_credits_total{model="m"} 0.2\n');
  });

  test("request, token, credit, latency and upstream series move as expected", async () => {
    const { gw } = gateway();
    const before = await scrape(gw);
    expect(sample(before, "modelgate_requests_total")).toBe(0);
    expect(sample(before, "modelgate_upstream_up", { upstream: "a" })).toBe(1);

    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const streamed = await gw.chat({ model: "m", messages: HELLO, stream: true });
      expect(streamed.status).toBe(200);
      await streamed.text();
    }
    const m = await scrape(gw);

    const ok = { model: "m", endpoint: "chat", upstream: "b", identity: "anonymous", status: "200" };
    expect(sample(m, "modelgate_requests_total", ok)).toBe(3);
    const prompt = gw.records.reduce((n, r) => n + r.promptTokens, 0);
    expect(prompt).toBeGreaterThan(0);
    expect(sample(m, "modelgate_tokens_total", { model: "m", type: "prompt" })).toBe(prompt);
    expect(sample(m, "modelgate_tokens_total", { model: "m", type: "completion" })).toBe(18);
    const micro = gw.records.reduce((n, r) => n + r.costMicro, 0);
    expect(micro).toBe(prompt * 1_000 + 18 * 2_000);
    expect(sample(m, "modelgate_credits_total", { model: "m" })).toBe(micro / 1_000_000);
    expect(sample(m, "modelgate_request_duration_seconds_count", { model: "m" })).toBe(3);
    expect(sample(m, "modelgate_request_duration_seconds_bucket", { model: "m", le: "+Inf" })).toBe(3);
    expect(sample(m, "modelgate_upstream_duration_seconds_count", { upstream: "b" })).toBe(3);
    expect(sample(m, "modelgate_gateway_overhead_seconds_count")).toBe(3);
    expect(sample(m, "modelgate_upstream_attempts_total", { upstream: "a", outcome: "failure" })).toBe(3);
    expect(sample(m, "modelgate_upstream_attempts_total", { upstream: "b", outcome: "success" })).toBe(3);
    // a's failures were 5xx answers: they count against the model's target, not a's own circuit.
    expect(sample(m, "modelgate_upstream_consecutive_failures", { upstream: "a" })).toBe(0);
    expect(sample(m, "modelgate_upstream_circuit_state", { upstream: "a", state: "closed" })).toBe(1);
    expect(sample(m, "modelgate_models")).toBe(1);
    expect(sample(m, "modelgate_build_info", { version: "test" })).toBe(1);
  });

  test("a model whose target's own circuit opened shows modelgate_target_up 0 while its upstream stays up (regression: every metric said up while the model could not be served)", async () => {
    const sick = startMockUpstream({ failWith: 503 });
    const well = startMockUpstream();
    mocks.push(sick, well);
    const gw = routerApp({
      upstreams: [
        { name: "box", base_url: sick.url },
        { name: "other", base_url: well.url },
      ],
      models: [
        { id: "large", targets: [{ upstream: "box" }] },
        // Two targets on one upstream: a series each (review finding: one series twice).
        {
          id: "small",
          targets: [
            { upstream: "other", model: "small-q4" },
            { upstream: "other", model: "small-q8" },
          ],
        },
      ],
      routing: { retry_backoff_ms: 0, cooldown_failures: 2 },
    });
    const up = { model: "large", upstream: "box", target: "large" };
    expect(sample(await scrape(gw), "modelgate_target_up", up)).toBe(1);
    for (let i = 0; i < 2; i++) expect((await gw.chat({ model: "large", messages: HELLO })).status).toBeGreaterThanOrEqual(502);
    const m = await scrape(gw);
    expect(sample(m, "modelgate_target_up", up)).toBe(0);
    expect(sample(m, "modelgate_upstream_up", { upstream: "box" })).toBe(1);
    for (const target of ["small-q4", "small-q8"]) expect(sample(m, "modelgate_target_up", { model: "small", upstream: "other", target })).toBe(1);
    expect((await (await gw.request("/metrics")).text()).match(/^modelgate_target_up\{/gm)).toHaveLength(3);
  });

  test("the series of a model no longer routed are shown once more, then dropped (regression: every discovered id ever served kept its ~20 series)", async () => {
    const up = startMockUpstream({ models: ["d1"] });
    mocks.push(up);
    const gw = routerApp({ upstreams: [{ name: "up", base_url: up.url, discover: true, discover_free: true }] });
    await discoverOnce(gw.deps.registry, gw.deps.config.upstreams[0]);
    expect((await gw.chat({ model: "d1", messages: HELLO })).status).toBe(200);
    expect((await gw.chat({ model: "nowhere", messages: HELLO })).status).toBe(404);
    expect(sample(await scrape(gw), "modelgate_requests_total", { model: "d1" })).toBe(1);
    expect((await gw.chat({ model: "d1", messages: HELLO })).status).toBe(200);
    up.behaviour.models = ["d2"];
    await discoverOnce(gw.deps.registry, gw.deps.config.upstreams[0]);
    expect((await gw.chat({ model: "d2", messages: HELLO })).status).toBe(200);
    // Still routed at the last scrape: its last request is shown once (review finding: it was dropped unseen).
    expect(sample(await scrape(gw), "modelgate_requests_total", { model: "d1" })).toBe(2);
    const text = await (await gw.request("/metrics")).text();
    expect(text).not.toContain('model="d1"');
    expect(sample(parseMetrics(text), "modelgate_requests_total", { model: "d2" })).toBe(1);
    expect(sample(parseMetrics(text), "modelgate_requests_total", { model: "" })).toBe(1); // refused before a route: kept
  });

  test("retain drops series and keeps the rest; a dropped series made again starts from zero", () => {
    const counter = new Counter("c_total", "c", ["model", "kind"]);
    counter.inc(["a", "x"], 2);
    counter.inc(["b", "x"], 3);
    counter.retain((labels) => labels[0] !== "a");
    expect(counter.render()).toBe('# HELP c_total c\n# TYPE c_total counter\nc_total{model="b",kind="x"} 3\n');
    counter.inc(["a", "x"]);
    counter.inc(["b", "x"]);
    expect([counter.get(["a", "x"]), counter.get(["b", "x"])]).toEqual([1, 4]);
  });

  test("upstream failures and rate-limit rejections are counted by status", async () => {
    let limited = true;
    const gate: Gate = {
      admit(_input) {
        if (limited) return new GatewayError("rate_limit_exceeded", "slow down", { headers: { "retry-after": "1" } });
        return { identity: { kind: "api_key", userId: 1, keyId: "k1", subject: "k1" }, headers: {}, settle() {} };
      },
    };
    const { gw, b } = gateway({ gate });
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(429);
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(429);
    limited = false;
    b.behaviour.failWith = 500;
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(502);
    const m = await scrape(gw);
    expect(sample(m, "modelgate_rate_limited_total", { identity: "anonymous" })).toBe(2);
    expect(sample(m, "modelgate_requests_total", { status: "429" })).toBe(2);
    expect(sample(m, "modelgate_requests_total", { model: "m", upstream: "", identity: "api_key", status: "502" })).toBe(1);
  });

  test("extra gauges registered by other parts appear in the scrape", async () => {
    const { gw } = gateway();
    let depth = 7;
    gw.metrics.registerGauge({ name: "modelgate_webhook_outbox_depth", help: "Jobs waiting in the outbox.", collect: () => depth });
    expect(sample(await scrape(gw), "modelgate_webhook_outbox_depth")).toBe(7);
    depth = 0;
    expect(sample(await scrape(gw), "modelgate_webhook_outbox_depth")).toBe(0);
  });

  test("with [metrics] token set, a scrape needs that bearer token", async () => {
    const { gw } = gateway({ token: "scrape-secret" });
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: "scrape-secret" }] as Record<string, string>[]) {
      const res = await gw.request("/metrics", { headers });
      expect(res.status).toBe(401);
      const body = await res.text();
      expect(body).not.toContain("scrape-secret");
      expect(JSON.parse(body).error.code).toBe("authentication_required");
    }
    await scrape(gw, { authorization: "Bearer scrape-secret" });
  });

  test("[metrics] enabled = false removes the endpoint", async () => {
    const gw = routerApp({ metrics: { enabled: false } });
    expect((await gw.request("/metrics")).status).toBe(404);
  });
});

describe("request log lines", () => {
  const record: RequestRecord = {
    requestId: "req_1",
    createdAt: Date.UTC(2026, 0, 1),
    identity: "api_key",
    userId: 3,
    keyId: "key_abc",
    model: "m",
    endpoint: "chat",
    upstream: "b",
    status: 200,
    promptTokens: 10,
    completionTokens: 5,
    costMicro: 20_000,
    latencyMs: 12.3456,
    upstreamMs: 10.1,
  };

  function capture(options: { level: "debug" | "info" | "warn" | "error"; requests: boolean }) {
    const writes: string[] = [];
    const logger = createLogger({ ...options, write: (text) => void writes.push(text) });
    return {
      logger,
      writes,
      lines: () =>
        writes
          .join("")
          .split("\n")
          .filter(Boolean)
          .map((l) => JSON.parse(l)),
    };
  }

  test("a batch is written with one write, one JSON object per line", () => {
    const { logger, writes, lines } = capture({ level: "info", requests: true });
    logger.requests([record, { ...record, requestId: "req_2", status: 502, upstream: null }]);
    expect(writes.length).toBe(1);
    expect(lines()).toEqual([
      {
        time: "2026-01-01T00:00:00.000Z",
        level: "info",
        msg: "request",
        request_id: "req_1",
        identity: "api_key",
        user_id: 3,
        key_id: "key_abc",
        model: "m",
        endpoint: "chat",
        upstream: "b",
        status: 200,
        prompt_tokens: 10,
        completion_tokens: 5,
        cost_micro: 20_000,
        duration_ms: 12.35,
        upstream_ms: 10.1,
        overhead_ms: 2.25,
      },
      expect.objectContaining({ request_id: "req_2", level: "warn", status: 502, upstream: null }),
    ]);
  });

  test("follow [log] level and [log] requests", () => {
    const warn = capture({ level: "warn", requests: true });
    warn.logger.log("info", "hidden");
    warn.logger.log("error", "shown");
    warn.logger.requests([record, { ...record, requestId: "req_bad", status: 503 }]);
    expect(warn.lines().map((l) => l.request_id ?? l.msg)).toEqual(["shown", "req_bad"]);

    const off = capture({ level: "debug", requests: false });
    off.logger.requests([record]);
    expect(off.writes).toEqual([]);
  });
});
