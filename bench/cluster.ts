/**
 * Scaling out (`make bench-cluster`, docs/scaling.md): 1, 2 and 3 replicas sharing one SQLite file
 * and one Redis (`[cluster] redis_url`) against one replica with its limits in memory, on the
 * API-key path (the key's bucket checked on every request). Each setup is loaded by one wrk per
 * replica at once, CLUSTER_CONNECTIONS in all; the table gives requests/s, the CPU the replicas
 * spent per request (and Redis's apart), and the median latency of one connection alone, whose
 * difference between Redis and memory on one replica is the round trip the limit check adds.
 * On a machine with fewer cores than replicas, requests/s cannot grow with them: the CPU per
 * request is the number that carries over.
 *
 * Knobs: CLUSTER_DURATION_S (3), CLUSTER_CONNECTIONS (24), CLUSTER_ROUNDS (3; medians).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { BINARY, freePort } from "../tests/support/binary";
import { median, processCpuMs, runWrk, type WrkResult } from "./load";
import { scenario } from "./measure";
import { benchConfig, createApiKey, type BenchGateway } from "./peers/modelgate";
import { answers, benchDir, killOnExit, startMock } from "./processes";

const DURATION_S = Number(process.env.CLUSTER_DURATION_S ?? 3);
const CONNECTIONS = Number(process.env.CLUSTER_CONNECTIONS ?? 24);
const ROUNDS = Number(process.env.CLUSTER_ROUNDS ?? 3);

const { url: mockUrl } = await startMock(freePort(), null);

async function startRedis(): Promise<{ url: string; proc: Subprocess }> {
  const port = freePort();
  const dir = mkdtempSync(join(tmpdir(), "modelgate-bench-redis-"));
  const proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdout: "ignore",
    stderr: "ignore",
  });
  killOnExit(proc);
  const url = `redis://127.0.0.1:${port}`;
  const { RedisClient } = await import("bun");
  for (;;) {
    const probe = new RedisClient(url, { autoReconnect: false, connectionTimeout: 500 });
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.close();
    if (up) return { url, proc };
    await Bun.sleep(25);
  }
}

/** `count` replicas on one data directory; with `redisUrl`, sharing it. */
async function startReplicas(count: number, redisUrl: string | null): Promise<BenchGateway[]> {
  const dir = benchDir("modelgate-bench-cluster-");
  const replicas: BenchGateway[] = [];
  for (let i = 0; i < count; i++) {
    const port = freePort();
    const file = join(dir, `replica-${i}.toml`);
    const cluster = redisUrl === null ? "" : `[cluster]\nredis_url = "${redisUrl}"\n\n`;
    writeFileSync(file, `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n\n${cluster}${benchConfig(mockUrl)}`);
    const env = { ...process.env, MODELGATE_CONFIG: file };
    const url = `http://127.0.0.1:${port}`;
    // Logs to a file, as to a journal: a pipe into this process would have the harness read every request line.
    const log = Bun.file(join(dir, `replica-${i}.log`));
    const proc = Bun.spawn([BINARY, "serve"], { cwd: dir, env, stdout: log, stderr: log, stdin: "ignore" });
    killOnExit(proc);
    const deadline = Date.now() + 15_000;
    while (!(await answers(`${url}/api/health`)().catch(() => false))) {
      if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`replica ${i} did not come up (log: ${join(dir, `replica-${i}.log`)})`);
      await Bun.sleep(25);
    }
    replicas.push({
      url,
      proc,
      cli: async (args) => {
        const child = Bun.spawn([BINARY, ...args], { cwd: dir, env, stdout: "pipe", stderr: "ignore", stdin: "ignore" });
        const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
        return { code, stdout };
      },
    });
  }
  return replicas;
}

interface Row {
  setup: string;
  rps: number;
  cpuUs: number;
  redisCpuUs: number | null;
  p50Ms: number;
}

async function measure(setup: string, count: number, redis: { url: string; proc: Subprocess } | null): Promise<Row> {
  const replicas = await startReplicas(count, redis?.url ?? null);
  const key = await createApiKey(replicas[0]);
  if (key === null) throw new Error("could not create an API key");
  const scenarios = replicas.map((r) =>
    scenario(
      { name: r.url, url: `${r.url}/v1/chat/completions`, headers: { authorization: `Bearer ${key}` }, pid: r.proc.pid, streaming: false, note: null },
      false,
    ),
  );
  const load = (durationS: number, connections: number): Promise<WrkResult[]> =>
    Promise.all(scenarios.map((s) => runWrk(s, { connections: Math.max(1, Math.floor(connections / scenarios.length)), durationS, cpus: null })));
  await load(1, CONNECTIONS);
  const rps: number[] = [];
  const cpu: number[] = [];
  const redisCpu: number[] = [];
  const p50: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const before = replicas.map((r) => processCpuMs(r.proc.pid));
    const redisBefore = redis === null ? 0 : processCpuMs(redis.proc.pid);
    const results = await load(DURATION_S, CONNECTIONS);
    if (results.some((r) => r.errors > 0)) throw new Error(`${setup}: errors (${results.map((r) => r.errors).join(", ")})`);
    const requests = results.reduce((sum, r) => sum + r.requests, 0);
    rps.push(results.reduce((sum, r) => sum + r.rps, 0));
    cpu.push((replicas.reduce((sum, r, i) => sum + processCpuMs(r.proc.pid) - before[i], 0) * 1000) / requests);
    if (redis !== null) redisCpu.push(((processCpuMs(redis.proc.pid) - redisBefore) * 1000) / requests);
    p50.push((await runWrk(scenarios[0], { connections: 1, durationS: DURATION_S, cpus: null })).p50Ms);
  }
  for (const r of replicas) {
    r.proc.kill();
    await r.proc.exited;
  }
  return { setup, rps: median(rps), cpuUs: median(cpu), redisCpuUs: redis === null ? null : median(redisCpu), p50Ms: median(p50) };
}

const redis = await startRedis();
const rows = [await measure("1 replica, limits in memory", 1, null)];
for (const count of [1, 2, 3]) rows.push(await measure(`${count} replica${count > 1 ? "s" : ""}, limits in Redis`, count, redis));

console.log(`API-key path, ${CONNECTIONS} connections in all, ${ROUNDS} rounds of ${DURATION_S} s (medians); ${navigator.hardwareConcurrency} CPUs`);
console.log("| setup | requests/s | replica CPU µs/request | Redis CPU µs/request | p50 latency, 1 connection |");
console.log("|---|---:|---:|---:|---:|");
for (const row of rows) {
  console.log(
    `| ${row.setup} | ${Math.round(row.rps)} | ${row.cpuUs.toFixed(1)} | ${row.redisCpuUs === null ? "-" : row.redisCpuUs.toFixed(1)} | ${row.p50Ms.toFixed(3)} ms |`,
  );
}
const added = (rows[1].p50Ms - rows[0].p50Ms) * 1000;
console.log(
  `Redis over in-memory buckets, one replica: ${added.toFixed(0)} µs added per request (p50 of one connection), ${(rows[1].cpuUs - rows[0].cpuUs).toFixed(1)} µs more replica CPU per request`,
);
process.exit(0);
