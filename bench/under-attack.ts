/**
 * "Under attack" (part of `make bench`; also runnable alone: `bun bench/under-attack.ts`, with
 * BENCH_DURATION_S and BENCH_PIN=0 as in bench/run.ts). A normal client's latency on the free
 * model with nobody attacking, then while a second client sends at full speed chat bodies nested
 * 100,000 levels deep (200 KB), bodies over server.max_body_bytes, then both. The attackers run at
 * nice 19 on the client CPU, standing for other machines.
 * Beside it the worst event-loop stall, seen from outside: a probe process polls /api/health one
 * request after another, and its longest wait between two answers is the longest the gateway went
 * without answering. Targets (issue 32): p99 under attack within 2x the quiet p99, no stall > 50 ms.
 * Bounded: each phase lasts `durationS`; the attackers are wrk runs bounded the same way.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePort } from "../tests/support/binary";
import { runWrk, type Scenario, type WrkResult } from "./load";
import { BENCH_MODEL, startModelgate } from "./peers/modelgate";
import { benchDir, killOnExit, pinTo, startMock } from "./processes";

export interface UnderAttackOptions {
  /** The mock upstream's base URL (bench/run.ts passes its own); one is started when absent. */
  mockUrl?: string;
  pin?: (pid: number) => void;
  /** CPUs for wrk and the probe (taskset list), or null. */
  clientCpus?: string | null;
  durationS?: number;
}

/** Connections of the normal client, the bomb sender and the oversized-body sender. */
const NORMAL_CONNECTIONS = 8;
const BOMB_CONNECTIONS = 4;
const OVERSIZED_CONNECTIONS = 2;
const DEPTH = 100_000;
/** Past the default server.max_body_bytes (10 MiB): refused with 413. */
const OVERSIZED_BYTES = 11 * 1024 * 1024;
const STALL_TARGET_MS = 50;

/** The probe: sequential GET /api/health for argv[3] seconds; prints its longest gap and p99, ms. */
const PROBE = `const url = process.argv[2], until = performance.now() + Number(process.argv[3]) * 1000;
let last = performance.now(), maxGap = 0; const times = [];
while (performance.now() < until) {
  const sent = performance.now();
  await fetch(url).then((r) => r.text());
  const now = performance.now();
  times.push(now - sent); maxGap = Math.max(maxGap, now - last); last = now;
}
times.sort((a, b) => a - b);
console.log(JSON.stringify({ maxGapMs: maxGap, p99Ms: times[Math.floor(times.length * 0.99)], requests: times.length }));`;

interface ProbeResult {
  maxGapMs: number;
  p99Ms: number;
  requests: number;
}

/** Who attacks in a phase: connections sending depth bombs and oversized bodies (0: none). */
const PHASES = [
  { name: "quiet", bombs: 0, oversized: 0 },
  { name: "depth bombs", bombs: BOMB_CONNECTIONS, oversized: 0 },
  { name: "oversized bodies", bombs: 0, oversized: OVERSIZED_CONNECTIONS },
  { name: "both", bombs: BOMB_CONNECTIONS, oversized: OVERSIZED_CONNECTIONS },
] as const;

interface Phase {
  name: string;
  normal: WrkResult;
  probe: ProbeResult;
  bombs: WrkResult | null;
  oversized: WrkResult | null;
}

async function probe(file: string, url: string, durationS: number, cpus: string | null): Promise<ProbeResult> {
  const argv = [process.execPath, file, `${url}/api/health`, String(durationS)];
  const proc = Bun.spawn(cpus === null ? argv : ["taskset", "-c", cpus, ...argv], { stdout: "pipe", stderr: "inherit" });
  killOnExit(proc);
  const out = await new Response(proc.stdout).text();
  if ((await proc.exited) !== 0) throw new Error(`the /api/health probe failed: ${out}`);
  return JSON.parse(out) as ProbeResult;
}

function chat(url: string, body: string): Scenario {
  return { name: "chat", url: `${url}/v1/chat/completions`, headers: { "content-type": "application/json" }, body };
}

export async function runUnderAttackBench(input: UnderAttackOptions = {}): Promise<string> {
  const durationS = input.durationS ?? 3;
  const cpus = input.clientCpus ?? null;
  const dir = benchDir("modelgate-bench-attack-");
  const probeFile = join(dir, "probe.ts");
  writeFileSync(probeFile, PROBE);
  const mockUrl = input.mockUrl ?? (await startMock(freePort(), null)).url;
  const gateway = await startModelgate(mockUrl);
  killOnExit(gateway.proc);
  input.pin?.(gateway.proc.pid);
  try {
    const messages = '"messages":[{"role":"user","content":"Say hello in one short sentence."}]';
    const normal = chat(gateway.url, `{"model":"${BENCH_MODEL}",${messages}}`);
    const bomb = chat(gateway.url, `{"model":"${BENCH_MODEL}",${messages},"x":${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}}`);
    const oversized = chat(gateway.url, `{"model":"${BENCH_MODEL}",${messages},"pad":"${"a".repeat(OVERSIZED_BYTES)}"}`);
    const wrk = (s: Scenario, connections: number, seconds: number) => runWrk(s, { connections, durationS: seconds, cpus });
    // The attackers share the client CPU with the normal client and the probe, but stand for other
    // machines: at nice 19 they take only what those leave, so what is measured is the gateway.
    const attack = (s: Scenario, connections: number) => runWrk(s, { connections, durationS: durationS + 2, cpus, background: true });
    await wrk(normal, NORMAL_CONNECTIONS, 1);
    const phases: Phase[] = [];
    for (const phase of PHASES) {
      console.error(`· under attack: ${phase.name}`);
      // The attackers start first and end last: the whole measured phase is under attack.
      const attackers = Promise.all([phase.bombs > 0 ? attack(bomb, phase.bombs) : null, phase.oversized > 0 ? attack(oversized, phase.oversized) : null]);
      if (phase.bombs + phase.oversized > 0) await Bun.sleep(1_000);
      const [normalRun, probeRun] = await Promise.all([wrk(normal, NORMAL_CONNECTIONS, durationS), probe(probeFile, gateway.url, durationS, cpus)]);
      const [bombs, over] = await attackers;
      phases.push({ name: phase.name, normal: normalRun, probe: probeRun, bombs, oversized: over });
    }
    return report(phases, durationS);
  } finally {
    gateway.proc.kill("SIGKILL");
  }
}

function report(phases: Phase[], durationS: number): string {
  const ms = (n: number): string => n.toFixed(2);
  const rate = (r: WrkResult | null): string => (r === null ? "–" : Math.round(r.rps).toLocaleString("en-US"));
  const [quiet, ...attacked] = phases;
  // A phase in which the normal client got no answer at all has no p99: infinitely worse.
  const ratio = (p: Phase): number => (p.normal.requests === 0 ? Infinity : p.normal.p99Ms / quiet.normal.p99Ms);
  const row = (p: Phase): string =>
    `| ${p.name} | ${rate(p.normal)} | ${ms(p.normal.p50Ms)} | ${ms(p.normal.p99Ms)} | ${ratio(p).toFixed(2)}x | ${p.normal.errors} | ${ms(p.probe.maxGapMs)} | ${ms(p.probe.p99Ms)} | ${rate(p.bombs)} | ${rate(p.oversized)} |`;
  const worstRatio = Math.max(...attacked.map(ratio));
  const worstStall = Math.max(...phases.map((p) => p.probe.maxGapMs));
  return [
    "### Under attack (bench/under-attack.ts)",
    "",
    `A normal client (${NORMAL_CONNECTIONS} connections, non-streamed chat on the free model) for ${durationS} s per phase: alone, then while a second client sends, at full speed (wrk), ` +
      `bodies nested ${DEPTH.toLocaleString("en-US")} levels deep (${BOMB_CONNECTIONS} connections, 400), ${OVERSIZED_BYTES / 1024 / 1024} MiB bodies (${OVERSIZED_CONNECTIONS} connections, 413), or both. ` +
      "The stall is the longest gap between two answers of a probe polling /api/health one request after another (the quiet row is the machine's own noise).",
    "",
    "| Phase | Normal req/s | p50 (ms) | p99 (ms) | p99 / quiet | Errors | Longest /api/health gap (ms) | Probe p99 (ms) | Bombs/s | Oversized/s |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...phases.map(row),
    "",
    `Worst p99 under attack / quiet: ${worstRatio.toFixed(2)}x (target <= 2x: ${worstRatio <= 2 ? "met" : "NOT met"}). ` +
      `Longest stall seen: ${ms(worstStall)} ms (target <= ${STALL_TARGET_MS} ms: ${worstStall <= STALL_TARGET_MS ? "met" : "NOT met"}).`,
    "",
  ].join("\n");
}

if (import.meta.main) {
  const pin = process.env.BENCH_PIN !== "0" && Bun.which("taskset") !== null;
  pinTo(process.pid, pin ? "1" : null);
  const markdown = await runUnderAttackBench({
    pin: (pid) => pinTo(pid, pin ? "0" : null),
    clientCpus: pin ? "1" : null,
    durationS: Number(process.env.BENCH_DURATION_S ?? 3),
  });
  console.log(markdown);
  process.exit(0);
}
