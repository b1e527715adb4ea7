/**
 * The timed part of `make bench` (bench/run.ts): the targets, the scenario each is sent, and the
 * rounds. Rounds interleave the targets (direct, proxy, modelgate, peer, direct, ...) so that
 * noise from anything else on the machine lands on every target alike; each cell is the median
 * round. Within a round the loaded runs of all targets come one after another (then the c=1 runs,
 * then the streams). A target compared with the floor (`pairedWithFloor`) is run between two
 * loaded runs of the floor, and its ratio in that round is against their mean: a machine that
 * speeds up or slows down during the round moves both sides alike. The verdict is the median of
 * the rounds' ratios, which drifts far less than a ratio of medians.
 */
import { measureStream, processCpuMs, runWrk, type Scenario, type StreamResult, type WrkResult } from "./load";
import { BENCH_MODEL } from "./peers/modelgate";
import type { TargetResult } from "./report";

/** A system under test: where to POST, what headers, and the process to pin and weigh. */
export interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  pid: number;
  streaming: boolean;
  note: string | null;
  /** The model asked for; BENCH_MODEL (free) unless set. */
  model?: string;
  /** The floor itself (the bare proxy), which paired targets are measured between. */
  isFloor?: boolean;
  pairedWithFloor?: boolean;
}

export interface MeasureOptions {
  rounds: number;
  durationS: number;
  warmupS: number;
  concurrency: number;
  /** CPUs to pin wrk to, or null. */
  clientCpus: string | null;
}

export function scenario(target: Target, stream: boolean): Scenario {
  const body = JSON.stringify({
    model: target.model ?? BENCH_MODEL,
    messages: [{ role: "user", content: "Say hello in one short sentence." }],
    ...(stream ? { stream: true } : {}),
  });
  return { name: `${target.name}${stream ? " (stream)" : ""}`, url: target.url, headers: { "content-type": "application/json", ...target.headers }, body };
}

/** The run of a round whose p50 is the median of the rounds: one whole run, not mixed percentiles. */
function medianRun<T>(runs: T[], key: (run: T) => number): T {
  return [...runs].sort((a, b) => key(a) - key(b))[Math.floor((runs.length - 1) / 2)];
}

export async function measureAll(targets: Target[], options: MeasureOptions): Promise<TargetResult[]> {
  const { concurrency, durationS } = options;
  const wrk = { cpus: options.clientCpus };
  const floor = targets.find((t) => t.isFloor);
  const c1 = targets.map((): WrkResult[] => []);
  const cN = targets.map((): Array<WrkResult & { cpuUsPerRequest: number }> => []);
  const floorAround = targets.map((): number[] => []);
  const streamN = targets.map((): WrkResult[] => []);
  const streams = targets.map((): StreamResult[] => []);
  for (const target of targets) {
    console.error(`· warm-up ${target.name}`);
    await runWrk(scenario(target, false), { ...wrk, connections: concurrency, durationS: options.warmupS });
    if (target.streaming) await measureStream(scenario(target, true), { durationMs: 300, maxRequests: 200 });
  }
  const loadedRun = (target: Target): Promise<WrkResult> => runWrk(scenario(target, false), { ...wrk, connections: concurrency, durationS });
  for (let round = 1; round <= options.rounds; round++) {
    console.error(`· round ${round}/${options.rounds}`);
    let floorBefore: WrkResult | null = null;
    for (const [i, target] of targets.entries()) {
      const cpuBefore = processCpuMs(target.pid);
      const loaded = await loadedRun(target);
      cN[i].push({ ...loaded, cpuUsPerRequest: ((processCpuMs(target.pid) - cpuBefore) * 1000) / loaded.requests });
      if (target.isFloor) floorBefore = loaded;
      if (target.pairedWithFloor && floor && floorBefore) {
        const floorAfter = await loadedRun(floor);
        floorAround[i].push((floorBefore.rps + floorAfter.rps) / 2);
        floorBefore = floorAfter;
      }
    }
    for (const [i, target] of targets.entries()) c1[i].push(await runWrk(scenario(target, false), { ...wrk, connections: 1, durationS }));
    for (const [i, target] of targets.entries()) {
      if (!target.streaming) continue;
      const stream = scenario(target, true);
      streams[i].push(await measureStream(stream, { durationMs: 1000 * Math.min(durationS, 1), maxRequests: 2000 }));
      streamN[i].push(await runWrk(stream, { ...wrk, connections: concurrency, durationS }));
    }
  }
  return targets.map((target, i) => ({
    name: target.name,
    c1: { ...medianRun(c1[i], (r) => r.p50Ms), p99Ms: medianRun(c1[i], (r) => r.p99Ms).p99Ms },
    cN: medianRun(cN[i], (r) => r.rps),
    rpsByRound: cN[i].map((r) => r.rps),
    floorRpsByRound: floorAround[i].length === cN[i].length ? floorAround[i] : null,
    cpuUsPerRequest: medianRun(cN[i], (r) => r.cpuUsPerRequest).cpuUsPerRequest,
    stream: streams[i].length ? { ...medianRun(streams[i], (r) => r.ttfbP50Ms), ttfbP99Ms: medianRun(streams[i], (r) => r.ttfbP99Ms).ttfbP99Ms } : null,
    streamN: streamN[i].length ? medianRun(streamN[i], (r) => r.rps) : null,
    rssAfterMb: null,
    note: target.note,
  }));
}
