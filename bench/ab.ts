/**
 * Compares two builds of modelgate by serving them at the same time: both gateways and one mock
 * upstream share CPU 0, one wrk per gateway runs on CPU 1, and each round loads both at once. The
 * scheduler gives the two gateways equal CPU time, so their requests/s differ by their CPU cost per
 * request, and whatever slows the machine during a round slows both alike. That is why this finds
 * differences of one or two percent that `make bench` (one target after another) cannot: there
 * the rounds of one run span ten points or more. It measures CPU cost only; a stall that leaves
 * the core idle (an fsync) costs nothing here, since the other gateway uses the core meanwhile.
 *
 *   bun bench/ab.ts BINARY_A BINARY_B     # e.g. a build of main against dist/modelgate
 *
 * Knobs: AB_ROUNDS (16), AB_DURATION_S (2), AB_CONNECTIONS (16, per gateway), AB_PATH
 * (paid | key | anonymous; default paid: API key on the priced model, metering on), AB_POLICY_B
 * (1: B's key has every key policy set, none binding, or the flags of one part: `make ab A=dist/modelgate AB_POLICY_B=1`
 * measures what checking a policy costs against the same build's key without one).
 */
import { resolve } from "node:path";
import { freePort } from "../tests/support/binary";
import { median, processCpuMs, runWrk, type Scenario } from "./load";
import { scenario } from "./measure";
import { BENCH_MODEL, BENCH_PAID_MODEL, createApiKey, startModelgate } from "./peers/modelgate";
import { killOnExit, pinTo, startMock } from "./processes";

const ROUNDS = Number(process.env.AB_ROUNDS ?? 16);
const DURATION_S = Number(process.env.AB_DURATION_S ?? 2);
const CONNECTIONS = Number(process.env.AB_CONNECTIONS ?? 16);
const PATH = process.env.AB_PATH ?? "paid";
/** Every key policy, none of them binding during a run. */
const EVERY_POLICY = [
  "--models",
  "mock-*,other*",
  "--budget",
  "1000000/month",
  "--per-minute",
  "1000000000",
  "--tokens-per-minute",
  "1000000000",
  "--allow-ip",
  "10.0.0.0/8,127.0.0.0/8",
];
/** AB_POLICY_B: "1" for every policy, or the flags themselves (`--budget 5/day`) to measure one part. */
function policyB(value: string | undefined): string[] {
  if (value === undefined || value === "") return [];
  return value === "1" ? EVERY_POLICY : value.split(" ");
}
const binaries = process.argv.slice(2).map((binary) => resolve(binary));
if (binaries.length !== 2 || !["paid", "key", "anonymous"].includes(PATH)) {
  console.error("usage: bun bench/ab.ts BINARY_A BINARY_B   (AB_PATH = paid | key | anonymous)");
  process.exit(2);
}

pinTo(process.pid, "1");
const { url: mockUrl } = await startMock(freePort(), "0");

const model = PATH === "paid" ? BENCH_PAID_MODEL : BENCH_MODEL;
const targets: Array<{ name: string; pid: number; scenario: Scenario }> = [];
for (const [i, binary] of binaries.entries()) {
  const gateway = await startModelgate(mockUrl, binary);
  killOnExit(gateway.proc);
  pinTo(gateway.proc.pid, "0");
  const headers: Record<string, string> = {};
  if (PATH !== "anonymous") {
    const key = await createApiKey(gateway, i === 1 ? policyB(process.env.AB_POLICY_B) : []);
    if (key === null) throw new Error(`${binary}: could not create an API key`);
    headers.authorization = `Bearer ${key}`;
  }
  // The request `make bench` sends (bench/measure.ts), so the two benches time the same thing.
  const target = { name: binary, url: `${gateway.url}/v1/chat/completions`, headers, pid: gateway.proc.pid, streaming: false, note: null, model };
  targets.push({ name: binary, pid: gateway.proc.pid, scenario: scenario(target, false) });
}

const loadBoth = (durationS: number) => Promise.all(targets.map((t) => runWrk(t.scenario, { connections: CONNECTIONS, durationS, cpus: "1" })));
await loadBoth(1); // warm-up
const ratios: number[] = [];
const cpuUs = targets.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  const before = targets.map((t) => processCpuMs(t.pid));
  const results = await loadBoth(DURATION_S);
  if (results.some((r) => r.errors > 0)) throw new Error(`errors in round ${round + 1}: ${results.map((r) => r.errors).join(", ")}`);
  ratios.push(results[1].rps / results[0].rps);
  targets.forEach((t, i) => cpuUs[i].push(((processCpuMs(t.pid) - before[i]) * 1000) / results[i].requests));
}

const mean = (values: number[]): number => values.reduce((sum, v) => sum + v, 0) / values.length;
console.log(`path: ${PATH}, ${ROUNDS} rounds of ${DURATION_S} s, ${CONNECTIONS} connections each`);
targets.forEach((t, i) => console.log(`${i ? "B" : "A"}: ${t.name}, CPU ${median(cpuUs[i]).toFixed(1)} µs/request (median)`));
console.log(
  `B/A requests/s: median ${median(ratios).toFixed(3)}, mean ${mean(ratios).toFixed(3)}, rounds ${Math.min(...ratios).toFixed(3)}–${Math.max(...ratios).toFixed(3)}`,
);
process.exit(0);
