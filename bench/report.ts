/**
 * Turns the measurements of one run into the markdown that `make bench` prints and writes to
 * bench/results.md: the per-target table, then modelgate's ratios against the targets of issue 2.
 * Pure formatting; no measurement happens here.
 */
import type { StreamResult, WrkResult } from "./load";
import type { OpenStreamsResult } from "./footprint";
import type { RssSplit, StartupResult } from "./peers/modelgate";

export interface TargetResult {
  name: string;
  c1: WrkResult;
  cN: WrkResult;
  /** Requests/s at c=N in each round, in round order (rounds pair the targets' loaded runs). */
  rpsByRound: number[];
  /** For a target run between two runs of the floor: the mean of those two, per round. */
  floorRpsByRound: number[] | null;
  /** CPU time of the target's own process per request at c=N (the mock's excluded), µs. */
  cpuUsPerRequest: number;
  stream: StreamResult | null;
  streamN: WrkResult | null;
  /** RSS in MB after the load runs, when known. */
  rssAfterMb: number | null;
  note: string | null;
}

export interface RunFacts {
  date: string;
  machine: string;
  versions: string;
  pinning: string;
  durationS: number;
  rounds: number;
  concurrency: number;
  /** What else was running: the load average, with a warning when it makes latencies unreliable. */
  loadNote: string;
}

const f2 = (n: number): string => (Number.isFinite(n) ? n.toFixed(2) : "–");
const f0 = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "–");

export function resultsTable(results: TargetResult[], facts: RunFacts): string {
  const direct = results[0];
  const c = facts.concurrency;
  const lines = [
    `| target | p50 c=1 (ms) | p99 c=1 (ms) | added p50 | added p99 | req/s c=${c} | CPU µs/req | stream TTFB p50 / p99 (ms) | stream total p50 / p99 (ms) | stream req/s c=${c} | errors |`,
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const r of results) {
    const added = r === direct ? ["–", "–"] : [f2(r.c1.p50Ms - direct.c1.p50Ms), f2(r.c1.p99Ms - direct.c1.p99Ms)];
    const stream = r.stream ? [`${f2(r.stream.ttfbP50Ms)} / ${f2(r.stream.ttfbP99Ms)}`, `${f2(r.stream.totalP50Ms)} / ${f2(r.stream.totalP99Ms)}`] : ["–", "–"];
    const errors = r.c1.errors + r.cN.errors + (r.stream?.errors ?? 0) + (r.streamN?.errors ?? 0);
    lines.push(
      `| ${r.name}${r.note ? ` (${r.note})` : ""} | ${f2(r.c1.p50Ms)} | ${f2(r.c1.p99Ms)} | ${added[0]} | ${added[1]} | ${f0(r.cN.rps)} | ${f0(r.cpuUsPerRequest)} | ${stream[0]} | ${stream[1]} | ${r.streamN ? f0(r.streamN.rps) : "–"} | ${errors} |`,
    );
  }
  return lines.join("\n");
}

export interface Verdict {
  measure: string;
  value: string;
  target: string;
  met: boolean | null;
}

/** `a`'s requests/s over the floor's in each round (the floor runs around `a` when it had them), lowest first. */
function roundRatios(a: TargetResult, floor: TargetResult): number[] {
  const floorRps = a.floorRpsByRound ?? floor.rpsByRound;
  return a.rpsByRound.map((rps, round) => rps / floorRps[round]).sort((x, y) => x - y);
}

/** The median of sorted ratios (the lower middle one), and a ratio as a percentage. */
const middle = (ratios: number[]): number => ratios[Math.floor((ratios.length - 1) / 2)];
const pct = (ratio: number): string => (ratio * 100).toFixed(1);

/** The bare forwarder on modelgate's own HTTP client (bench/forwarder-floor.ts): what modelgate costs without its features. */
export const FORWARDER = "bare forwarder (modelgate's HTTP client)";

/** modelgate against the bare proxy, Portkey and the absolute targets. */
export function verdicts(
  byName: Map<string, TargetResult>,
  startup: StartupResult | null,
  concurrency: number,
  streams: OpenStreamsResult | null = null,
): Verdict[] {
  const direct = byName.get("direct (mock)");
  const proxy = byName.get("bare Bun proxy");
  const gate = byName.get("modelgate");
  const keyed = byName.get("modelgate (API key)");
  const paid = byName.get("modelgate (API key, paid model)");
  const portkey = byName.get("Portkey OSS");
  const out: Verdict[] = [];
  if (direct && proxy && gate) {
    out.push(addedRatio("added p50 over direct, vs the bare proxy's", gate.c1.p50Ms - direct.c1.p50Ms, proxy.c1.p50Ms - direct.c1.p50Ms, 1.15));
    out.push(addedRatio("added p99 over direct, vs the bare proxy's", gate.c1.p99Ms - direct.c1.p99Ms, proxy.c1.p99Ms - direct.c1.p99Ms, 1.3));
    for (const [who, result] of [
      ["", gate],
      [" (API key)", keyed],
      [" (API key, paid model: metered)", paid],
    ] as const) {
      if (!result) continue;
      const ratios = roundRatios(result, proxy);
      const rps = middle(ratios);
      const measure = `req/s at c=${concurrency}${who}, vs the bare proxy (median of the rounds' ratios)`;
      out.push({ measure, value: `${pct(rps)}% (rounds: ${pct(ratios[0])}–${pct(ratios.at(-1)!)}%)`, target: "≥ 85%", met: rps >= 0.85 });
    }
    out.push({
      measure: "CPU per request, vs the bare proxy (context)",
      value: `${f2(gate.cpuUsPerRequest / proxy.cpuUsPerRequest)}×`,
      target: "–",
      met: null,
    });
    const forwarder = byName.get(FORWARDER);
    if (forwarder) {
      out.push({
        measure: "bare forwarder req/s, vs the bare proxy (context: the same client, no features)",
        value: `${pct(middle(roundRatios(forwarder, proxy)))}%`,
        target: "–",
        met: null,
      });
      const features = (paid ?? gate).cpuUsPerRequest - forwarder.cpuUsPerRequest;
      out.push({
        measure: `CPU per request above the bare forwarder's, ${paid ? "paid model" : "anonymous"} (context: what the features cost)`,
        value: `${f0(features)} µs`,
        target: "–",
        met: null,
      });
    }
    out.push({ measure: "bare proxy req/s vs direct (context)", value: `${f2(proxy.cN.rps / direct.cN.rps)}×`, target: "–", met: null });
    if (gate.stream && proxy.stream && direct.stream) {
      const ttfb = (gate.stream.ttfbP50Ms - direct.stream.ttfbP50Ms) / (proxy.stream.ttfbP50Ms - direct.stream.ttfbP50Ms);
      out.push({ measure: "stream: added TTFB p50, vs the bare proxy's (context)", value: `${f2(ttfb)}×`, target: "–", met: null });
    }
  }
  if (gate && portkey) {
    const x = gate.cN.rps / portkey.cN.rps;
    out.push({ measure: `req/s at c=${concurrency}, vs Portkey OSS`, value: `${f2(x)}×`, target: "≥ 10×", met: x >= 10 });
  }
  if (startup) out.push(...footprintVerdicts(startup, streams));
  if (gate?.rssAfterMb) out.push({ measure: "RSS after the load runs", value: `${gate.rssAfterMb.toFixed(1)} MB`, target: "–", met: null });
  return out;
}

/** Issue 34's footprint targets: idle RSS, RSS with a thousand open streams, exec to healthy. */
export function footprintVerdicts(startup: StartupResult, streams: OpenStreamsResult | null): Verdict[] {
  const mb = (value: number): string => `${value.toFixed(1)} MB`;
  const split = (rss: RssSplit): string => `${mb(rss.rss)} (${rss.anon.toFixed(1)} anonymous / ${rss.file.toFixed(1)} file-backed)`;
  const out: Verdict[] = [
    { measure: "idle RSS (started, answered /api/health)", value: split(startup.idle), target: "≤ 50 MB", met: startup.idle.rss <= 50 },
    { measure: "RSS after 20 chat requests", value: split(startup.afterChat), target: "–", met: null },
    { measure: "RSS after /api/status, /metrics, the dashboard and Swagger (the app built)", value: split(startup.afterPages), target: "–", met: null },
  ];
  if (streams) {
    const perStreamKb = ((streams.openMb - streams.beforeMb) * 1024) / streams.streams;
    out.push({
      measure: `RSS with ${streams.streams.toLocaleString("en")} slow streams open`,
      value: mb(streams.openMb),
      target: "≤ 150 MB",
      met: streams.openMb <= 150,
    });
    out.push({
      measure: "of which anonymous / file-backed; added per stream",
      value: `${streams.openAnonMb.toFixed(1)} / ${mb(streams.openFileMb)}; ${perStreamKb.toFixed(0)} KB`,
      target: "–",
      met: null,
    });
  }
  out.push({
    measure: `exec to first healthy /api/health (median of ${startup.starts - 1} starts)`,
    value: `${startup.warmMs.toFixed(1)} ms`,
    target: "≤ 100 ms",
    met: startup.warmMs <= 100,
  });
  out.push({ measure: "exec to first healthy, first start (creates the database)", value: `${startup.coldMs.toFixed(1)} ms`, target: "–", met: null });
  return out;
}

/** A ratio of added latencies; undefined when the proxy's addition is lost in the noise (≤ 0). */
function addedRatio(measure: string, gateAdded: number, proxyAdded: number, limit: number): Verdict {
  if (!(proxyAdded > 0)) {
    return { measure, value: `n/a (modelgate +${f2(gateAdded)} ms; proxy's ${f2(proxyAdded)} ms is noise)`, target: `≤ ${limit}×`, met: null };
  }
  const ratio = gateAdded / proxyAdded;
  return { measure, value: `${f2(ratio)}× (+${f2(gateAdded)} vs +${f2(proxyAdded)} ms)`, target: `≤ ${limit}×`, met: ratio <= limit };
}

export function verdictTable(rows: Verdict[]): string {
  const lines = ["| modelgate | measured | target | met |", "| --- | ---: | ---: | :---: |"];
  for (const v of rows) lines.push(`| ${v.measure} | ${v.value} | ${v.target} | ${v.met === null ? "" : v.met ? "yes" : "**no**"} |`);
  return lines.join("\n");
}

export function factsBlock(facts: RunFacts): string {
  return [
    `Measured ${facts.date} on ${facts.machine}; ${facts.versions}.`,
    `Each cell is the median of ${facts.rounds} rounds of ${facts.durationS} s that interleave the targets, after a warm-up (${facts.pinning}).`,
    "Streamed figures at c=1 come from a sequential fetch client (TTFB = first body chunk).",
    "CPU µs/req is the target process's own CPU time (all threads, the mock's excluded) per request in the c=N run.",
    facts.loadNote,
  ].join(" ");
}
