/**
 * Scaling out (`make bench-cluster`, docs/scaling.md): one replica on SQLite with its limits in
 * memory against 1, 2 and 3 replicas sharing one Redis (`[cluster] redis_url`), first on one SQLite
 * file, then on one Postgres database (`[database] url`), on the API-key path of a free model (the
 * key's bucket checked on every request; the key cache warm, so Postgres sees only the write-behind
 * batches: request log, key last-used times). Each setup is loaded by one wrk per replica at once,
 * CLUSTER_CONNECTIONS in all; the table gives requests/s, the CPU the replicas spent per request
 * (Redis's and Postgres's apart, all processes of theirs, from /proc), the limit scripts each
 * request ran in Redis, and the median latency of one connection alone. Then it counts the
 * commands one request sends Redis (MONITOR) on the free model, on a paid one, and with a token
 * limit.
 * On a machine with fewer cores than replicas, requests/s cannot grow with them: the CPU per
 * request is the number that carries over.
 *
 * Knobs: CLUSTER_DURATION_S (3), CLUSTER_CONNECTIONS (24), CLUSTER_ROUNDS (3; medians).
 */
import { startPostgres } from "../tests/support/postgres";
import { freePort } from "../tests/support/binary";
import { type BenchRedis, startRedis, startReplicas, stopReplicas } from "./cluster-setup";
import { median, processCpuMs, processTreeCpuMs, runWrk, type WrkResult } from "./load";
import { scenario } from "./measure";
import { BENCH_MODEL, BENCH_PAID_MODEL, createApiKey } from "./peers/modelgate";
import { startMock } from "./processes";

const DURATION_S = Number(process.env.CLUSTER_DURATION_S ?? 3);
const CONNECTIONS = Number(process.env.CLUSTER_CONNECTIONS ?? 24);
const ROUNDS = Number(process.env.CLUSTER_ROUNDS ?? 3);
const COUNTED_REQUESTS = 200;

const { url: mockUrl } = await startMock(freePort(), null);
const redis = await startRedis();
const postgres = await startPostgres();
let databases = 0;

interface Setup {
  name: string;
  count: number;
  redis: BenchRedis | null;
  postgres: boolean;
}

interface Row {
  setup: string;
  rps: number;
  cpuUs: number;
  redisCpuUs: number | null;
  postgresCpuUs: number | null;
  redisScripts: number | null;
  p50Ms: number;
}

/** µs of CPU per request from ms before and after `requests`. */
const perRequest = (beforeMs: number, afterMs: number, requests: number): number => ((afterMs - beforeMs) * 1000) / requests;

async function measure(setup: Setup): Promise<Row> {
  const databaseUrl = setup.postgres ? await postgres.createDatabase(`bench_${++databases}`) : null;
  const replicas = await startReplicas(mockUrl, { count: setup.count, redisUrl: setup.redis?.url ?? null, databaseUrl });
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
  const [rps, cpu, redisCpu, postgresCpu, scripts, p50]: number[][] = [[], [], [], [], [], []];
  for (let round = 0; round < ROUNDS; round++) {
    const before = replicas.map((r) => processCpuMs(r.proc.pid));
    const redisBefore = setup.redis === null ? 0 : processCpuMs(setup.redis.proc.pid);
    const postgresBefore = processTreeCpuMs(postgres.pid);
    const scriptsBefore = (await setup.redis?.scripts()) ?? 0;
    const results = await load(DURATION_S, CONNECTIONS);
    if (results.some((r) => r.errors > 0)) throw new Error(`${setup.name}: errors (${results.map((r) => r.errors).join(", ")})`);
    const requests = results.reduce((sum, r) => sum + r.requests, 0);
    rps.push(results.reduce((sum, r) => sum + r.rps, 0));
    cpu.push(replicas.reduce((sum, r, i) => sum + perRequest(before[i], processCpuMs(r.proc.pid), requests), 0));
    postgresCpu.push(perRequest(postgresBefore, processTreeCpuMs(postgres.pid), requests));
    if (setup.redis !== null) {
      redisCpu.push(perRequest(redisBefore, processCpuMs(setup.redis.proc.pid), requests));
      scripts.push(((await setup.redis.scripts()) - scriptsBefore) / requests);
    }
    p50.push((await runWrk(scenarios[0], { connections: 1, durationS: DURATION_S, cpus: null })).p50Ms);
  }
  await stopReplicas(replicas);
  const withRedis = (values: number[]): number | null => (setup.redis === null ? null : median(values));
  return {
    setup: setup.name,
    rps: median(rps),
    cpuUs: median(cpu),
    redisCpuUs: withRedis(redisCpu),
    postgresCpuUs: setup.postgres ? median(postgresCpu) : null,
    redisScripts: withRedis(scripts),
    p50Ms: median(p50),
  };
}

/** Redis's MONITOR feed while `during` runs: one line per command, those a script ran marked `[0 lua]`. */
async function monitored(during: () => Promise<void>): Promise<string[]> {
  const monitor = Bun.spawn(["redis-cli", "-u", redis.url, "MONITOR"], { stdout: "pipe", stderr: "ignore" });
  await Bun.sleep(200);
  await during();
  await Bun.sleep(200); // Commands sent without waiting (a charge) land.
  monitor.kill();
  return (await new Response(monitor.stdout).text()).split("\n");
}

/**
 * What one request sends Redis, by command, over COUNTED_REQUESTS sequential requests to one
 * replica on Postgres + Redis (MONITOR's lines from the replica's connection; the commands its
 * Lua script runs inside Redis are counted apart): on the free model, on the paid one, and on the
 * paid one with a key that has a tokens-per-minute limit (a second bucket, charged after the answer).
 */
async function countCommands(): Promise<string[]> {
  const [replica] = await startReplicas(mockUrl, { count: 1, redisUrl: redis.url, databaseUrl: await postgres.createDatabase("bench_commands") });
  const key = await createApiKey(replica);
  const tokens = await replica.cli(["key", "create", "--user", "bench@modelgate.invalid", "--name", "tokens", "--tokens-per-minute", "1000000000"]);
  const tokensKey = tokens.stdout.match(/sk-mg-[A-Za-z0-9_-]+/)?.[0];
  if (key === null || tokensKey === undefined) throw new Error("could not create the API keys");
  const lines: string[] = [];
  for (const [name, model, bearer] of [
    ["free model", BENCH_MODEL, key],
    ["paid model", BENCH_PAID_MODEL, key],
    ["paid model, key with --tokens-per-minute", BENCH_PAID_MODEL, tokensKey],
  ]) {
    const body = JSON.stringify({ model, messages: [{ role: "user", content: "Say hello in one short sentence." }] });
    const send = async (): Promise<void> => {
      const headers = { authorization: `Bearer ${bearer}`, "content-type": "application/json" };
      const response = await fetch(`${replica.url}/v1/chat/completions`, { method: "POST", headers, body });
      if (!response.ok) throw new Error(`${name}: ${response.status} ${await response.text()}`);
      await response.arrayBuffer();
    };
    await send(); // The key cache warm, the script cached in Redis.
    const feed = await monitored(async () => {
      for (let i = 0; i < COUNTED_REQUESTS; i++) await send();
    });
    const sent = new Map<string, number>();
    let inScripts = 0;
    for (const line of feed) {
      const command = line.match(/^\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"/);
      if (command === null) continue;
      if (command[1] === "lua") inScripts++;
      else sent.set(command[2].toUpperCase(), (sent.get(command[2].toUpperCase()) ?? 0) + 1);
    }
    const each = [...sent].map(([command, calls]) => `${(calls / COUNTED_REQUESTS).toFixed(2)} ${command}`);
    lines.push(`- ${name}: ${each.join(" + ") || "none"} sent per request; ${(inScripts / COUNTED_REQUESTS).toFixed(2)} commands run inside the script`);
  }
  await stopReplicas([replica]);
  return lines;
}

const setups: Setup[] = [{ name: "1 replica, SQLite, limits in memory", count: 1, redis: null, postgres: false }];
for (const postgresToo of [false, true]) {
  for (const count of [1, 2, 3]) {
    const name = `${count} replica${count > 1 ? "s" : ""}, ${postgresToo ? "Postgres" : "SQLite"} + Redis`;
    setups.push({ name, count, redis, postgres: postgresToo });
  }
}
const rows: Row[] = [];
let commandLines: string[];
try {
  for (const setup of setups) {
    console.error(`· ${setup.name}`);
    rows.push(await measure(setup));
  }
  commandLines = await countCommands();
} finally {
  // The cluster runs as a user of its own, outside the children the bench kills when it exits.
  await postgres.stop();
}

const cell = (value: number | null, digits: number): string => (value === null ? "-" : value.toFixed(digits));
console.log(
  `API-key path (free model), ${CONNECTIONS} connections in all, ${ROUNDS} rounds of ${DURATION_S} s (medians); ${navigator.hardwareConcurrency} CPUs`,
);
console.log(
  "| setup | requests/s | replica CPU µs/request | Redis CPU µs/request | Postgres CPU µs/request | Redis EVALSHA/request | p50 latency, 1 connection |",
);
console.log("|---|---:|---:|---:|---:|---:|---:|");
for (const row of rows) {
  console.log(
    `| ${row.setup} | ${Math.round(row.rps)} | ${row.cpuUs.toFixed(1)} | ${cell(row.redisCpuUs, 1)} | ${cell(row.postgresCpuUs, 1)} | ${cell(row.redisScripts, 2)} | ${row.p50Ms.toFixed(3)} ms |`,
  );
}
const [memory, sqliteRedis] = rows;
const postgresRedis = rows[4];
const added = (a: Row, b: Row): string =>
  `${((b.p50Ms - a.p50Ms) * 1000).toFixed(0)} µs added per request (p50 of one connection), ${(b.cpuUs - a.cpuUs).toFixed(1)} µs more replica CPU per request`;
console.log(`Redis over in-memory buckets, one replica on SQLite: ${added(memory, sqliteRedis)}`);
console.log(`Postgres over SQLite, one replica with Redis: ${added(sqliteRedis, postgresRedis)}`);
console.log("Redis commands per request, one replica on Postgres + Redis:");
for (const line of commandLines) console.log(line);
process.exit(0);
