/**
 * Load balancing, the circuit breaker with an injected clock, aliases and discovery, with mock
 * upstreams over loopback.
 */
import { describe, expect, test } from "bun:test";
import { buildConfig } from "../../src/config/load";
import { ModelRegistry } from "../../src/router/registry";
import { orderTargets } from "../../src/router/select";
import { recordTargetAnswered } from "../../src/router/target-state";
import { discoverOnce, MAX_ID_CHARACTERS, MAX_MODELS } from "../../src/router/discover";
import { HELLO, json, mockUpstreams, routerApp, seededRandom } from "./helpers";
import { freePort } from "../support/binary";

const mock = mockUpstreams();

describe("weighted", () => {
  test("splits requests by weight within a tolerance", async () => {
    const [a, b, c] = [mock(), mock(), mock()];
    const gw = routerApp(
      {
        upstreams: [
          { name: "a", base_url: a.url },
          { name: "b", base_url: b.url },
          { name: "c", base_url: c.url },
        ],
        models: [
          {
            id: "m",
            free: true,
            strategy: "weighted",
            targets: [
              { upstream: "a", weight: 6 },
              { upstream: "b", weight: 3 },
              { upstream: "c", weight: 1 },
            ],
          },
        ],
      },
      { random: seededRandom(7) },
    );
    const n = 600;
    for (let i = 0; i < n; i++) expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount() + b.chatCount() + c.chatCount()).toBe(n);
    expect(Math.abs(a.chatCount() / n - 0.6)).toBeLessThan(0.06);
    expect(Math.abs(b.chatCount() / n - 0.3)).toBeLessThan(0.06);
    expect(Math.abs(c.chatCount() / n - 0.1)).toBeLessThan(0.04);
  });

  test("a weight-0 target is never picked first but still serves as the last fallback", () => {
    const { config } = buildConfig(
      {
        upstreams: [
          { name: "a", base_url: "http://127.0.0.1:1/v1" },
          { name: "z", base_url: "http://127.0.0.1:2/v1" },
        ],
        models: [
          {
            id: "m",
            strategy: "weighted",
            targets: [
              { upstream: "z", weight: 0 },
              { upstream: "a", weight: 1 },
            ],
          },
        ],
      },
      { env: {} },
    );
    const route = new ModelRegistry(config).resolve("m")!;
    const random = seededRandom(1);
    for (let i = 0; i < 50; i++) expect(orderTargets(route, 0, random).map((t) => t.upstream.name)).toEqual(["a", "z"]);
  });
});

describe("least-latency", () => {
  test("unmeasured targets go first, then the lowest moving average of time to first byte", () => {
    const { config } = buildConfig(
      {
        upstreams: ["a", "b", "c"].map((name, i) => ({ name, base_url: `http://127.0.0.1:${i + 1}/v1` })),
        models: [{ id: "m", strategy: "least-latency", targets: [{ upstream: "a" }, { upstream: "b" }, { upstream: "c" }] }],
      },
      { env: {} },
    );
    const registry = new ModelRegistry(config);
    const route = registry.resolve("m")!;
    const [a, b, c] = route.targets;
    recordTargetAnswered(a, 80);
    recordTargetAnswered(b, 20);
    expect(orderTargets(route, 0).map((t) => t.upstream.name)).toEqual(["c", "b", "a"]);
    recordTargetAnswered(c, 50);
    expect(orderTargets(route, 0).map((t) => t.upstream.name)).toEqual(["b", "c", "a"]);
  });

  test("the average is the target's, not its upstream's: a fast small model on the same box does not make a slow large one look fast (regression: one average per upstream)", () => {
    const { config } = buildConfig(
      {
        upstreams: [
          { name: "box-a", base_url: "http://127.0.0.1:1/v1" },
          { name: "box-b", base_url: "http://127.0.0.1:2/v1" },
        ],
        models: [
          {
            id: "chat",
            strategy: "least-latency",
            targets: [
              { upstream: "box-a", model: "llama-70b" },
              { upstream: "box-b", model: "llama-8b" },
            ],
          },
          { id: "tiny", targets: [{ upstream: "box-a", model: "qwen-0.5b" }] },
        ],
      },
      { env: {} },
    );
    const registry = new ModelRegistry(config);
    const chat = registry.resolve("chat")!;
    recordTargetAnswered(chat.targets[0], 400);
    recordTargetAnswered(chat.targets[1], 5);
    for (let i = 0; i < 40; i++) recordTargetAnswered(registry.resolve("tiny")!.targets[0], 1);
    expect(orderTargets(chat, 0).map((t) => t.model)).toEqual(["llama-8b", "llama-70b"]);
    expect(registry.upstreams.get("box-a")!.ttfbEwmaMs).toBeLessThan(5); // the upstream's own average, for status and metrics
  });
});

describe("cooldown", () => {
  function setup() {
    let clock = 1_000_000;
    const a = mock({ failWith: 503 });
    const b = mock();
    const gw = routerApp(
      {
        upstreams: [
          { name: "a", base_url: a.url },
          { name: "b", base_url: b.url },
        ],
        models: [{ id: "m", free: true, targets: [{ upstream: "a" }, { upstream: "b" }] }],
        routing: { cooldown_failures: 2, cooldown_ms: 10_000, retry_backoff_ms: 0 },
      },
      { now: () => clock },
    );
    // a answers 503: it is reachable, so the circuit that opens is its target's (/v1/models), not the upstream's.
    const stateOf = async (name: string): Promise<string> =>
      (await json(await gw.request("/v1/models"))).data[0].targets.find((t: { upstream: string }) => t.upstream === name).state;
    return { a, b, gw, stateOf, advance: (ms: number) => (clock += ms) };
  }

  test("a model the upstream answers with 5xx is stopped alone; its other models go on (regression: one request for a model Ollama could not load stopped every model on it for 30 s)", async () => {
    let clock = 1_000_000;
    const ollama = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async (request) => {
        const body = (await request.json()) as { model: string };
        if (body.model === "big") return Response.json({ error: "model requires more system memory (40.0 GiB) than is available (15.2 GiB)" }, { status: 500 });
        return Response.json({
          id: "c",
          object: "chat.completion",
          choices: [{ index: 0, message: { role: "assistant", content: "ok" } }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        });
      },
    });
    try {
      const gw = routerApp(
        {
          upstreams: [{ name: "ollama", base_url: `http://127.0.0.1:${ollama.port}/v1` }],
          models: [
            { id: "big", free: true, targets: [{ upstream: "ollama" }] },
            { id: "small", free: true, targets: [{ upstream: "ollama" }] },
          ],
        },
        { now: () => clock },
      );
      // Defaults: max_attempts 3 = cooldown_failures 3, so one request opens big's circuit.
      const big = await gw.chat({ model: "big", messages: HELLO });
      expect(big.status).toBe(502);
      expect((await json(big)).error.message).toBe('upstream "ollama" answered 500: model requires more system memory (40.0 GiB) than is available (15.2 GiB)');
      expect((await gw.chat({ model: "big", messages: HELLO })).status).toBe(503);
      expect((await gw.chat({ model: "small", messages: HELLO })).status).toBe(200);
      const models = await json(await gw.request("/v1/models"));
      expect(models.data.map((m: { id: string; targets: { state: string }[] }) => [m.id, m.targets[0].state])).toEqual([
        ["big", "open"],
        ["small", "closed"],
      ]);
      const upstream = (await json(await gw.request("/api/status"))).upstreams[0];
      expect(upstream).toMatchObject({
        name: "ollama",
        state: "closed",
        last_error: 'upstream "ollama" answered 500: model requires more system memory (40.0 GiB) than is available (15.2 GiB)',
      });
      clock += 30_000;
      expect((await gw.chat({ model: "big", messages: HELLO })).status).toBe(502); // probed again after the cooldown
    } finally {
      ollama.stop(true);
    }
  });

  test("an upstream that cannot be reached is stopped for every model on it", async () => {
    const clock = 1_000_000;
    const gw = routerApp(
      {
        upstreams: [{ name: "gone", base_url: `http://127.0.0.1:${freePort()}/v1` }],
        models: [
          { id: "one", free: true, targets: [{ upstream: "gone" }] },
          { id: "two", free: true, targets: [{ upstream: "gone" }] },
        ],
        routing: { retry_backoff_ms: 0 },
      },
      { now: () => clock },
    );
    expect((await gw.chat({ model: "one", messages: HELLO })).status).toBe(502);
    const two = await gw.chat({ model: "two", messages: HELLO });
    expect(two.status).toBe(503);
    expect((await json(two)).error.message).toMatch(/^every target of model "two" is cooling down after repeated failures; try again in 30 s$/);
    expect((await json(await gw.request("/api/status"))).upstreams[0].state).toBe("open");
  });

  test("a failing target is skipped while cooling down, probed once, and readmitted on success", async () => {
    const { a, b, gw, stateOf, advance } = setup();
    for (let i = 0; i < 2; i++) expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount()).toBe(2);
    expect(await stateOf("a")).toBe("open");
    const models = await json(await gw.request("/v1/models"));
    expect(models.data[0].upstreams).toEqual(["open", "closed"]);
    expect(models.data[0].targets[0]).toMatchObject({ upstream: "a", state: "open" });

    // Open: a is not even tried.
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount()).toBe(2);
    advance(9_999);
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount()).toBe(2);

    // Cooldown over: half-open, the next request probes a, which has recovered.
    advance(1);
    expect(await stateOf("a")).toBe("half-open");
    a.behaviour.failWith = undefined;
    const before = b.chatCount();
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount()).toBe(3);
    expect(b.chatCount()).toBe(before);
    expect(await stateOf("a")).toBe("closed");
    expect(gw.records.at(-1)!.upstream).toBe("a");
  });

  test("a failed probe opens the circuit again for a full cooldown", async () => {
    const { a, gw, stateOf, advance } = setup();
    for (let i = 0; i < 2; i++) await gw.chat({ model: "m", messages: HELLO });
    advance(10_000);
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(200);
    expect(a.chatCount()).toBe(3);
    expect(await stateOf("a")).toBe("open");
    advance(9_999);
    await gw.chat({ model: "m", messages: HELLO });
    expect(a.chatCount()).toBe(3);
  });

  test("when every target is cooling down: 503 with Retry-After, no upstream called", async () => {
    let clock = 0;
    const a = mock({ failWith: 500 });
    const gw = routerApp(
      {
        upstreams: [{ name: "a", base_url: a.url }],
        models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }],
        routing: { cooldown_failures: 1, cooldown_ms: 5_000, max_attempts: 1 },
      },
      { now: () => clock },
    );
    expect((await gw.chat({ model: "m", messages: HELLO })).status).toBe(502);
    clock += 1_000;
    const res = await gw.chat({ model: "m", messages: HELLO });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("4");
    expect((await json(res)).error.code).toBe("service_unavailable");
    expect(a.chatCount()).toBe(1);
  });
});

describe("aliases", () => {
  test("an alias routes to its model; the upstream gets the target's model name", async () => {
    const a = mock();
    const gw = routerApp({
      upstreams: [{ name: "a", base_url: a.url }],
      models: [{ id: "llama", free: true, aliases: ["default", "fast"], targets: [{ upstream: "a", model: "llama3.1:8b" }] }],
    });
    const res = await gw.chat({ model: "fast", messages: HELLO });
    expect(res.status).toBe(200);
    expect(a.requests[0].body.model).toBe("llama3.1:8b");
    expect(gw.records[0].model).toBe("llama");
    const models = (await json(await gw.request("/v1/models"))).data;
    expect(models.map((m: { id: string }) => m.id)).toEqual(["llama"]);
    expect(models[0].aliases).toEqual(["default", "fast"]);
    expect((await gw.chat({ model: "slow", messages: HELLO })).status).toBe(404);
  });
});

describe("discover", () => {
  test("routes follow the models an upstream adds and drops; a failed poll keeps the last list", async () => {
    const up = mock({ models: ["m1", "m2"] });
    const gw = routerApp({ upstreams: [{ name: "up", base_url: up.url, discover: true, discover_free: true }] });
    const upstream = gw.deps.config.upstreams[0];
    const ids = async (): Promise<string[]> => (await json(await gw.request("/v1/models"))).data.map((m: { id: string }) => m.id);
    expect(await ids()).toEqual([]);
    expect(await discoverOnce(gw.deps.registry, upstream)).toBe(true);
    expect(await ids()).toEqual(["m1", "m2"]);
    expect((await gw.chat({ model: "m1", messages: HELLO })).status).toBe(200);

    up.behaviour.models = ["m2", "m3"];
    await discoverOnce(gw.deps.registry, upstream);
    expect(await ids()).toEqual(["m2", "m3"]);
    const gone = await gw.chat({ model: "m1", messages: HELLO });
    expect(gone.status).toBe(404);
    expect((await json(gone)).error.code).toBe("model_not_found");
    expect((await gw.chat({ model: "m3", messages: HELLO })).status).toBe(200);
    expect(up.requests.at(-1)!.body.model).toBe("m3");

    up.stop();
    expect(await discoverOnce(gw.deps.registry, upstream)).toBe(false);
    expect(await ids()).toEqual(["m2", "m3"]);
  });

  test("the log tells the first list, what changed, a failure once and the recovery", async () => {
    let answer = (): Response => Response.json({ data: [{ id: "m1" }, { id: "m2" }] });
    const up = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => answer() });
    try {
      const gw = routerApp({ upstreams: [{ name: "up", base_url: `http://127.0.0.1:${up.port}/v1`, discover: true }] });
      const upstream = gw.deps.config.upstreams[0];
      const lines: string[] = [];
      const log = (level: string, msg: string, fields?: Record<string, unknown>): void => void lines.push(`${level} ${msg} ${JSON.stringify(fields ?? {})}`);
      await discoverOnce(gw.deps.registry, upstream, log);
      await discoverOnce(gw.deps.registry, upstream, log); // the same list: nothing to say
      answer = () => Response.json({ data: [{ id: "m2" }, { id: "m3" }] });
      await discoverOnce(gw.deps.registry, upstream, log);
      answer = () => new Response("down", { status: 503 });
      await discoverOnce(gw.deps.registry, upstream, log);
      await discoverOnce(gw.deps.registry, upstream, log); // still down for the same reason: said once
      answer = () => Response.json({ data: [{ id: "m2" }, { id: "m3" }] });
      await discoverOnce(gw.deps.registry, upstream, log);
      expect(lines).toEqual([
        `info discovered 2 model(s) on upstream "up" {"models":["m1","m2"]}`,
        `info models on upstream "up" changed: 1 added, 1 dropped {"added":["m3"],"dropped":["m1"]}`,
        `warn discovery on upstream "up" failed: answered 503 {"models_kept":2}`,
        `info discovery on upstream "up" works again {}`,
      ]);
    } finally {
      up.stop(true);
    }
  });

  test("a failed poll's reason has the upstream's credentials taken out, and a redirect is a failure, not followed (regressions: a parse error quoting the key reached /api/status; a redirected list became routes chat could not reach)", async () => {
    const elsewhere = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => Response.json({ data: [{ id: "moved" }] }) });
    let answer = (): Response => new Response("discsecretKEY777abc is not valid");
    const up = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => answer() });
    try {
      const gw = routerApp({ upstreams: [{ name: "up", base_url: `http://127.0.0.1:${up.port}/v1`, api_key: "discsecretKEY777abc", discover: true }] });
      const upstream = gw.deps.config.upstreams[0];
      const lines: string[] = [];
      const log = (level: string, msg: string): void => void lines.push(`${level} ${msg}`);
      expect(await discoverOnce(gw.deps.registry, upstream, log)).toBe(false);
      const state = gw.deps.registry.upstreams.get("up")!;
      expect(state.lastError).toContain("[redacted]");
      expect(`${state.lastError} ${lines.join(" ")}`).not.toContain("discsecretKEY777abc");
      answer = () => Response.redirect(`http://127.0.0.1:${elsewhere.port}/v1/models`, 302);
      expect(await discoverOnce(gw.deps.registry, upstream, log)).toBe(false);
      expect(state.lastError).toContain("answered 302, a redirect: correct base_url");
      expect(gw.deps.registry.list()).toEqual([]);
    } finally {
      up.stop(true);
      elsewhere.stop(true);
    }
  });

  test("an id listed by two discovering upstreams is the route of the first in the config, whichever poll answers first", () => {
    const { config } = buildConfig(
      {
        upstreams: [
          { name: "first", base_url: "http://127.0.0.1:1/v1", discover: true },
          { name: "second", base_url: "http://127.0.0.1:2/v1", discover: true, discover_free: true },
        ],
      },
      { env: {} },
    );
    const registry = new ModelRegistry(config);
    registry.setDiscovered(config.upstreams[1], ["llama3"]);
    expect(registry.resolve("llama3")!.ownedBy).toBe("second");
    registry.setDiscovered(config.upstreams[0], ["llama3"]);
    expect(registry.resolve("llama3")).toMatchObject({ ownedBy: "first", free: false });
  });

  test("what a poll takes is bounded (count, id length, list size), and a slow poll is not overtaken", async () => {
    let answer: () => Response = () => Response.json({ data: [] });
    let gate: Promise<void> = Promise.resolve();
    const up = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async () => (await gate, answer()) });
    try {
      const gw = routerApp({ upstreams: [{ name: "up", base_url: `http://127.0.0.1:${up.port}/v1`, discover: true }] });
      const upstream = gw.deps.config.upstreams[0];
      const count = () => gw.deps.registry.list().length;
      answer = () => Response.json({ data: Array.from({ length: MAX_MODELS + 500 }, (_, i) => ({ id: `m${i}` })) });
      const warned: string[] = [];
      const log = (level: string, msg: string) => void (level === "warn" && warned.push(msg));
      expect(await discoverOnce(gw.deps.registry, upstream, log)).toBe(true);
      expect(count()).toBe(MAX_MODELS);
      await discoverOnce(gw.deps.registry, upstream, log);
      // Said once, when the cut starts (regression: the rest were cut without a word).
      expect(warned).toEqual([`upstream "up" lists ${MAX_MODELS + 500} models; only its first ${MAX_MODELS} are routes (configure the others in [[models]])`]);
      // Too long, or with a character that hides what it is (regression: "priced\u200b" listed as a second "priced").
      const hidden = ["priced\u200b", "bidi\u202egpt-4\u202c", "line\nbreak", "\u001b[31mred", "x\u2028y", "gpt-4 ", "a\u00a0b", "a\ufe0f", "a\u034fb"];
      answer = () => Response.json({ data: [{ id: "x".repeat(MAX_ID_CHARACTERS + 1) }, ...hidden.map((id) => ({ id })), { id: "ok" }] });
      await discoverOnce(gw.deps.registry, upstream);
      expect(gw.deps.registry.list().map((r) => r.id)).toEqual(["ok"]);
      answer = () => new Response(`{"data":[${'{"id":"y"},'.repeat(500_000)}{"id":"z"}]}`);
      expect(await discoverOnce(gw.deps.registry, upstream)).toBe(false);
      expect(gw.deps.registry.upstreams.get("up")!.lastError).toContain("over 4194304 bytes");
      expect(gw.deps.registry.list().map((r) => r.id)).toEqual(["ok"]);
      // A poll still waiting on the upstream: the next one does not start (and cannot be overwritten by it).
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      answer = () => Response.json({ data: [{ id: "old" }] });
      const slow = discoverOnce(gw.deps.registry, upstream);
      await Bun.sleep(20);
      expect(await discoverOnce(gw.deps.registry, upstream)).toBe(false);
      release();
      expect(await slow).toBe(true);
      expect(gw.deps.registry.list().map((r) => r.id)).toEqual(["old"]);
      // A successful poll ends the discovery error in /api/status.
      expect(gw.deps.registry.upstreams.get("up")!.lastError).toBeNull();
    } finally {
      up.stop(true);
    }
  });

  test("a configured model wins over a discovered one with the same id", async () => {
    const up = mock({ models: ["shared", "other"] });
    const gw = routerApp({
      upstreams: [{ name: "up", base_url: up.url, discover: true }],
      models: [{ id: "shared", free: true, targets: [{ upstream: "up", model: "real-name" }] }],
    });
    await discoverOnce(gw.deps.registry, gw.deps.config.upstreams[0]);
    const models = (await json(await gw.request("/v1/models"))).data;
    expect(models.map((m: { id: string; source: string }) => `${m.id}:${m.source}`)).toEqual(["shared:config", "other:discovered"]);
    await gw.chat({ model: "shared", messages: HELLO });
    expect(up.requests[0].body.model).toBe("real-name");
  });
});
