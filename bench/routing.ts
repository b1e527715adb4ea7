/**
 * Routing overhead, measured on loopback against the compiled binary: a one-target route, a
 * three-target route (weighted and failover), and failover past a target that refuses connections
 * or answers 503, each compared with the failed attempt's own time measured directly. Runs inside
 * `make bench` (bench/run.ts calls runRoutingBench) or alone: `bun bench/routing.ts`.
 * Every child process is ended before returning; every load run is bounded in time.
 */
import { join } from "node:path";
import type { Subprocess } from "bun";
import { freePort } from "../tests/support/binary";
import { median, percentile, runWrk, type Scenario, type WrkResult } from "./load";
import { checkConnect } from "../src/router/connect";
import { startBenchGateway, type BenchGateway, type LoopbackBenchOptions } from "./support/gateway";

const ROOT = join(import.meta.dir, "..");
/** Failures in a row before a circuit opens: never, so that every failover is measured. */
const NO_COOLDOWN = 1_000_000_000;
const BODY = JSON.stringify({ model: "one", messages: [{ role: "user", content: "Say hello in one short sentence." }] });

async function spawnMock(port: number, behaviour: string): Promise<Subprocess> {
  const code = `import { startMockUpstream } from "./tests/support/mock-upstream.ts"; startMockUpstream(${behaviour}, ${port});`;
  const proc = Bun.spawn([process.execPath, "-e", code], { cwd: ROOT, stdout: "ignore", stderr: "ignore" });
  for (let i = 0; i < 200; i++) {
    if (
      await fetch(`http://127.0.0.1:${port}/v1/models`).then(
        () => true,
        () => false,
      )
    )
      return proc;
    await Bun.sleep(25);
  }
  proc.kill();
  throw new Error("mock upstream did not start");
}

export async function runRoutingBench(options: LoopbackBenchOptions = {}): Promise<string> {
  const durationS = Math.max(1, (options.durationS ?? 4) - 1);
  const concurrency = options.concurrency ?? 32;
  const cpus = options.clientCpus ?? null;
  const failPort = freePort();
  const failing = await spawnMock(failPort, "{ failWith: 503 }");
  const failUrl = `http://127.0.0.1:${failPort}/v1`;
  const deadPort = freePort();
  let bench: BenchGateway | null = null;
  try {
    bench = await startBenchGateway(
      (mockUrl) => `
[routing]
retry_backoff_ms = 0
cooldown_failures = ${NO_COOLDOWN}
${["u1", "u2", "u3"].map((n) => `[[upstreams]]\nname = "${n}"\nbase_url = "${mockUrl}"\n`).join("")}
[[upstreams]]
name = "refusing"
base_url = "http://127.0.0.1:${deadPort}/v1"
[[upstreams]]
name = "failing"
base_url = "${failUrl}"
${route("one", ["u1"], "failover")}
${route("three-weighted", ["u1", "u2", "u3"], "weighted")}
${route("three-failover", ["u1", "u2", "u3"], "failover")}
${route("past-refused", ["refusing", "u1"], "failover")}
${route("past-503", ["failing", "u1"], "failover")}
`,
      options,
    );
    const { gateway, mockUrl } = bench;
    const scenario = (name: string, url: string, model: string): Scenario => ({
      name,
      url,
      headers: { "content-type": "application/json" },
      body: BODY.replace('"one"', JSON.stringify(model)),
    });
    const gw = `${gateway.url}/v1/chat/completions`;
    const names = ["one", "three-weighted", "three-failover", "past-refused", "past-503"];
    const scenarios = [
      scenario("mock directly", `${mockUrl}/chat/completions`, "mock-small"),
      scenario("503 answer, directly", `${failUrl}/chat/completions`, "x"),
      ...names.map((model) => scenario(model, gw, model)),
    ];
    // Sequential latency, interleaved in rounds so that load drifting on the machine hits every
    // scenario alike; then throughput with wrk at the harness's concurrency.
    const latencies = await interleavedLatency(scenarios, { rounds: 8, perRound: Math.max(50, durationS * 60) });
    const refusedMs = await refusedConnectMs(deadPort);
    const throughput = new Map<string, WrkResult>();
    for (const s of scenarios.slice(2)) throughput.set(s.name, await runWrk(s, { connections: concurrency, durationS, cpus }));
    const p50 = (name: string): number => median(latencies.get(name)!);
    const one = p50("one");
    await gateway.stop();
    const table = [
      `| route | p50 ms, sequential | p99 ms, sequential | req/s at c=${concurrency} | errors | p50 added vs one target |`,
      "|---|---:|---:|---:|---:|---:|",
      ...scenarios.map((s) => {
        const r = throughput.get(s.name);
        const added = r && s.name !== "one" ? f(p50(s.name) - one) : "";
        return `| ${s.name} | ${f(p50(s.name))} | ${f(percentile(latencies.get(s.name)!, 99))} | ${r ? Math.round(r.rps) : ""} | ${r ? r.errors : ""} | ${added} |`;
      }),
    ];
    const three = Math.max(p50("three-weighted"), p50("three-failover"));
    const failedOwn = p50("503 answer, directly");
    const past503 = p50("past-503") - one;
    const pastRefused = p50("past-refused") - one;
    return [
      "### Routing (bench/routing.ts)",
      "",
      ...table,
      "",
      `- Three targets vs one: p50 ${f(three)} ms vs ${f(one)} ms (${three <= one * 1.1 + 0.05 ? "no worse" : "WORSE"}).`,
      `- Failover past a 503: adds ${f(past503)} ms; the failed attempt alone (a 503 fetched directly) takes ${f(failedOwn)} ms (${past503 <= failedOwn * 1.25 + 0.05 ? "within" : "ABOVE"} its own time).`,
      `- Failover past a refused connection: adds ${f(pastRefused)} ms; a refused connect alone takes ${f(refusedMs)} ms.`,
      `- Cooldown is disabled here (cooldown_failures = ${NO_COOLDOWN}) to measure every failover; with the default (3), a failing target is skipped after its third failure and costs nothing until its probe.`,
    ].join("\n");
  } finally {
    bench?.close();
    failing.kill();
  }
}

function route(id: string, upstreams: string[], strategy: string): string {
  return `[[models]]\nid = "${id}"\nfree = true\nstrategy = "${strategy}"\ntargets = [${upstreams.map((u) => `{ upstream = "${u}", model = "mock-small" }`).join(", ")}]\n`;
}

async function interleavedLatency(scenarios: Scenario[], options: { rounds: number; perRound: number }): Promise<Map<string, number[]>> {
  const times = new Map<string, number[]>(scenarios.map((s) => [s.name, []]));
  for (const s of scenarios) for (let i = 0; i < 50; i++) await post(s); // warm-up
  for (let round = 0; round < options.rounds; round++) {
    for (const s of scenarios) {
      const list = times.get(s.name)!;
      for (let i = 0; i < options.perRound; i++) {
        const started = performance.now();
        await post(s);
        list.push(performance.now() - started);
      }
    }
  }
  return times;
}

async function post(s: Scenario): Promise<void> {
  const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
  await response.arrayBuffer();
}

async function refusedConnectMs(port: number): Promise<number> {
  const times: number[] = [];
  for (let i = 0; i < 200; i++) {
    const started = performance.now();
    await checkConnect("127.0.0.1", port, 1000);
    times.push(performance.now() - started);
  }
  return median(times);
}

function f(ms: number): string {
  return ms.toFixed(3);
}

if (import.meta.main) {
  console.log(await runRoutingBench());
}
