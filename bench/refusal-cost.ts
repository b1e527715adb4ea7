/**
 * What one attacking request of bench/under-attack.ts costs the gateway: CPU µs per refused
 * request while a client sends depth bombs (200 KB, 100,000 levels: 400) or 11 MiB bodies (413) at
 * full speed, with nothing else to do. Under attack the normal client waits behind these, so this
 * is the figure that moves its p99; unlike a p99 it holds still on a machine shared with other
 * work. A refusal of a body received whole is held back 100 ms (HOSTILE_BODY_HOLD_MS in
 * src/body.ts), so the attacker has many connections (RC_CONNECTIONS: 200 for bombs, 50 for
 * oversized bodies): with few, the gateway's idle CPU would be shared among a few refusals a second. Given two builds, their runs
 * alternate, and the median round of each is printed.
 *
 *   bun bench/refusal-cost.ts BINARY [BINARY_B]   # RC_ROUNDS (4), RC_DURATION_S (3), RC_KIND (bomb | oversized), RC_CONNECTIONS
 */
import { resolve } from "node:path";
import { freePort } from "../tests/support/binary";
import { median, processCpuMs, runWrk, type Scenario } from "./load";
import { BENCH_MODEL, startModelgate } from "./peers/modelgate";
import { killOnExit, pinTo, startMock } from "./processes";

const ROUNDS = Number(process.env.RC_ROUNDS ?? 4);
const DURATION_S = Number(process.env.RC_DURATION_S ?? 3);
const KIND = process.env.RC_KIND ?? "bomb";
const binaries = process.argv.slice(2).map((b) => resolve(b));
if (binaries.length < 1 || binaries.length > 2 || !["bomb", "oversized"].includes(KIND)) {
  console.error("usage: bun bench/refusal-cost.ts BINARY [BINARY_B]   (RC_KIND = bomb | oversized)");
  process.exit(2);
}

const messages = '"messages":[{"role":"user","content":"Say hello in one short sentence."}]';
const DEPTH = 100_000;
const OVERSIZED_BYTES = 11 * 1024 * 1024;
const body =
  KIND === "bomb"
    ? `{"model":"${BENCH_MODEL}",${messages},"x":${"[".repeat(DEPTH)}${"]".repeat(DEPTH)}}`
    : `{"model":"${BENCH_MODEL}",${messages},"pad":"${"a".repeat(OVERSIZED_BYTES)}"}`;
const connections = Number(process.env.RC_CONNECTIONS ?? (KIND === "bomb" ? 200 : 50));

pinTo(process.pid, "1");
const { url: mockUrl } = await startMock(freePort(), "0");
const cpuUs = binaries.map(() => [] as number[]);
for (let round = 0; round < ROUNDS; round++) {
  for (const [i, binary] of binaries.entries()) {
    // A fresh gateway each round: the discard budget starts full, as it does for an attack's start.
    const gateway = await startModelgate(mockUrl, binary);
    killOnExit(gateway.proc);
    pinTo(gateway.proc.pid, "0");
    const scenario: Scenario = { name: KIND, url: `${gateway.url}/v1/chat/completions`, headers: { "content-type": "application/json" }, body };
    const before = processCpuMs(gateway.proc.pid);
    const result = await runWrk(scenario, { connections, durationS: DURATION_S, cpus: "1" });
    cpuUs[i].push(((processCpuMs(gateway.proc.pid) - before) * 1000) / Math.max(1, result.requests));
    gateway.proc.kill("SIGKILL");
  }
}
console.log(`${KIND}: ${ROUNDS} rounds of ${DURATION_S} s, ${connections} connections`);
binaries.forEach((b, i) =>
  console.log(`${b}: CPU ${median(cpuUs[i]).toFixed(0)} µs per refused request (median; rounds ${cpuUs[i].map((v) => v.toFixed(0)).join(", ")})`),
);
process.exit(0);
