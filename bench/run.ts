/**
 * `make bench`: one bounded run on loopback comparing, for a non-streamed and a streamed chat
 * completion, the mock upstream called directly, modelgate (the compiled binary), a bare Bun
 * pass-through proxy, a bare forwarder on modelgate's own HTTP client (bench/forwarder-floor.ts)
 * and the Portkey OSS gateway. Prints a markdown table with modelgate's ratios against the targets
 * of issue 2, and its footprint against issue 34's (idle RSS, RSS with 1,000 open streams from
 * bench/footprint.ts, exec to healthy), and writes it to bench/results.md, followed by the sections other
 * parts contribute (bench/webhooks.ts, spendauth.ts, routing.ts, endpoints.ts, messages.ts, responses.ts, dashboard.ts, under-attack.ts,
 * when present; each also runs alone: `bun bench/under-attack.ts`).
 * Invariants: every child process is ended on exit; every load run is bounded in time; servers and
 * the load generator are pinned to separate CPUs when taskset exists (BENCH_PIN=0 turns that off).
 * Knobs: BENCH_ROUNDS (5), BENCH_DURATION_S (2, per round), BENCH_WARMUP_S (1), BENCH_CONCURRENCY (32), BENCH_PEERS=0 (skip Portkey).
 */
import { cpus } from "node:os";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../tests/support/binary";
import { FOOTPRINT_STREAMS, measureOpenStreams } from "./footprint";
import { measureAll, scenario, type Target } from "./measure";
import { BENCH_MODEL, BENCH_PAID_MODEL, createApiKey, measureStartup, rssMb, startModelgate } from "./peers/modelgate";
import { installPortkey, portkeyHeaders } from "./peers/portkey";
import { FORWARDER, factsBlock, resultsTable, verdicts, verdictTable } from "./report";
import { answers, killOnExit, pinTo, spawnServer, startMock } from "./processes";

const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const WARMUP_S = Number(process.env.BENCH_WARMUP_S ?? 1);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 32);
const PIN = process.env.BENCH_PIN !== "0" && Bun.which("taskset") !== null && cpus().length >= 2;
/** The CPUs servers and the load generator are pinned to (taskset lists), null when not pinning. */
const SERVER_CPUS = PIN ? "0" : null;
const CLIENT_CPUS = PIN ? "1" : null;

for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => process.exit(130));

/** One answer of each kind must be right before anything is timed. */
async function sanityCheck(target: Target): Promise<string | null> {
  for (const stream of target.streaming ? [false, true] : [false]) {
    const s = scenario(target, stream);
    const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
    const text = await response.text();
    const ok = response.ok && (stream ? text.includes("data: [DONE]") : text.includes('"chat.completion"'));
    if (!ok) return `${s.name}: HTTP ${response.status} ${text.slice(0, 200)}`;
  }
  return null;
}

async function optionalSections(mockUrl: string): Promise<string[]> {
  const sections: string[] = [];
  const modules: Array<[file: string, exportName: string]> = [
    ["webhooks.ts", "runWebhookBench"],
    ["spendauth.ts", "runSpendAuthBench"],
    ["routing.ts", "runRoutingBench"],
    ["endpoints.ts", "runEndpointsBench"],
    ["messages.ts", "runMessagesBench"],
    ["responses.ts", "runResponsesBench"],
    ["dashboard.ts", "runDashboardBench"],
    ["under-attack.ts", "runUnderAttackBench"],
    ["triage.ts", "runTriageBench"],
  ];
  for (const [file, exportName] of modules) {
    const path = join(import.meta.dir, file);
    if (!existsSync(path)) continue;
    console.error(`· ${file}`);
    try {
      const mod = (await import(path)) as Record<string, unknown>;
      const run = mod[exportName];
      if (typeof run !== "function") throw new Error(`bench/${file} does not export ${exportName}`);
      sections.push(
        String(await run({ mockUrl, pin: (pid: number) => pinTo(pid, SERVER_CPUS), clientCpus: CLIENT_CPUS, durationS: DURATION_S, concurrency: CONCURRENCY })),
      );
    } catch (error) {
      sections.push(`### bench/${file}\n\nFailed: ${(error as Error).message}`);
    }
  }
  return sections;
}

/** The 1-minute load average (Linux), NaN elsewhere. */
function loadAverage(): number {
  return existsSync("/proc/loadavg") ? Number(readFileSync("/proc/loadavg", "utf8").split(" ")[0]) : Number.NaN;
}

function loadNote(before: number): string {
  const text = `Load average ${before.toFixed(2)} before the run, ${loadAverage().toFixed(2)} after.`;
  return before > 1.5 ? `${text} **Other work was running: latencies are noisy; CPU µs/req is the steadier figure.**` : text;
}

async function main(): Promise<void> {
  if (!Bun.which("wrk")) throw new Error("wrk is not installed (make bench installs it: apt-get install -y wrk)");
  const loadAtStart = loadAverage();
  pinTo(process.pid, CLIENT_CPUS);
  const mockPort = freePort();
  const mock = await startMock(mockPort, SERVER_CPUS);
  const mockUrl = mock.url;
  const targets: Target[] = [];
  targets.push({ name: "direct (mock)", url: `${mockUrl}/chat/completions`, headers: {}, pid: mock.proc.pid, streaming: true, note: null });

  const proxyPort = freePort();
  const proxy = await spawnServer(
    [process.execPath, "bench/proxy-floor.ts", String(proxyPort), `http://127.0.0.1:${mockPort}`],
    answers(`http://127.0.0.1:${proxyPort}/v1/models`),
    SERVER_CPUS,
  );
  targets.push({
    name: "bare Bun proxy",
    url: `http://127.0.0.1:${proxyPort}/v1/chat/completions`,
    headers: {},
    pid: proxy.pid,
    streaming: true,
    note: null,
    isFloor: true,
  });
  const forwarderPort = freePort();
  const forwarder = await spawnServer(
    [process.execPath, "bench/forwarder-floor.ts", String(forwarderPort), `http://127.0.0.1:${mockPort}`, BENCH_MODEL],
    answers(`http://127.0.0.1:${forwarderPort}/health`),
    SERVER_CPUS,
  );
  targets.push({
    name: FORWARDER,
    url: `http://127.0.0.1:${forwarderPort}/v1/chat/completions`,
    headers: {},
    pid: forwarder.pid,
    streaming: false,
    note: null,
    pairedWithFloor: true,
  });

  const gateway = await startModelgate(mockUrl);
  killOnExit(gateway.proc);
  pinTo(gateway.proc.pid, SERVER_CPUS);
  targets.push({
    name: "modelgate",
    url: `${gateway.url}/v1/chat/completions`,
    headers: {},
    pid: gateway.proc.pid,
    streaming: true,
    note: null,
    pairedWithFloor: true,
  });
  const apiKey = await createApiKey(gateway);
  if (apiKey) {
    const keyed = {
      url: `${gateway.url}/v1/chat/completions`,
      headers: { authorization: `Bearer ${apiKey}` },
      pid: gateway.proc.pid,
      streaming: false,
      note: null,
      pairedWithFloor: true,
    };
    targets.push({ name: "modelgate (API key)", ...keyed });
    targets.push({ name: "modelgate (API key, paid model)", ...keyed, model: BENCH_PAID_MODEL });
  }

  let portkeyNote = "";
  if (process.env.BENCH_PEERS !== "0") {
    console.error("· installing Portkey OSS (bench/.peers/portkey) if missing");
    const install = await installPortkey();
    if ("error" in install) {
      portkeyNote = `Portkey OSS not measured: ${install.error}`;
    } else {
      const port = freePort();
      const proc = await spawnServer(install.command(port), () => fetch(`http://127.0.0.1:${port}/`).then(() => true), SERVER_CPUS);
      targets.push({
        name: "Portkey OSS",
        url: `http://127.0.0.1:${port}/v1/chat/completions`,
        headers: portkeyHeaders(mockUrl),
        pid: proc.pid,
        streaming: install.streaming,
        note: install.streaming ? null : "stream not measured",
      });
    }
  }

  for (const target of targets) {
    const problem = await sanityCheck(target);
    if (problem) throw new Error(`sanity check failed, nothing timed: ${problem}`);
  }
  const results = await measureAll(targets, { rounds: ROUNDS, durationS: DURATION_S, warmupS: WARMUP_S, concurrency: CONCURRENCY, clientCpus: CLIENT_CPUS });
  for (const [i, target] of targets.entries()) if (target.name === "modelgate") results[i].rssAfterMb = rssMb(target.pid);
  console.error("· modelgate start-up and idle RSS");
  const startup = await measureStartup(mockUrl, { starts: 7, pin: (pid) => pinTo(pid, SERVER_CPUS) });
  console.error(`· modelgate RSS with ${FOOTPRINT_STREAMS} slow streams open`);
  const streams = await measureOpenStreams({ streams: FOOTPRINT_STREAMS, pin: (pid) => pinTo(pid, SERVER_CPUS) });
  const sections = await optionalSections(mockUrl);

  const facts = {
    date: new Date().toISOString().slice(0, 10),
    machine: `${cpus().length} × ${cpus()[0]?.model.trim() ?? "unknown CPU"}`,
    versions: `Bun ${Bun.version}, ${Bun.which("node") ? `Node ${(await Bun.$`node --version`.text()).trim()} (Portkey)` : "no Node"}, wrk ${(await Bun.$`wrk -v`.nothrow().text()).match(/wrk\s+(\S+)/)?.[1] ?? "?"}`,
    pinning: PIN ? `servers pinned to CPU ${SERVER_CPUS}, wrk and the harness to CPU ${CLIENT_CPUS}, with taskset` : "no CPU pinning",
    durationS: DURATION_S,
    rounds: ROUNDS,
    loadNote: loadNote(loadAtStart),
    concurrency: CONCURRENCY,
  };
  const byName = new Map(results.map((r) => [r.name, r]));
  const markdown = [
    "## Benchmark",
    "",
    factsBlock(facts),
    "",
    resultsTable(results, facts),
    "",
    verdictTable(verdicts(byName, startup, CONCURRENCY, streams)),
    ...(portkeyNote ? ["", portkeyNote] : []),
    ...sections.flatMap((s) => ["", s]),
    "",
  ].join("\n");
  writeFileSync(join(import.meta.dir, "results.md"), markdown);
  console.log(markdown);
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(`bench failed: ${(error as Error).message}`);
    process.exit(1);
  },
);
