/**
 * The parts bench/cluster.ts starts: one redis-server (no persistence, on a free loopback port),
 * replicas of the compiled binary on one SQLite file or one Postgres database with or without that
 * Redis, and Redis's own count of the limit scripts it ran (INFO commandstats). Postgres itself comes from tests/support/postgres.ts, as the tests start it.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { RedisClient, type Subprocess } from "bun";
import { BINARY, freePort } from "../tests/support/binary";
import { benchConfig, type BenchGateway } from "./peers/modelgate";
import { answers, benchDir, killOnExit } from "./processes";

export interface BenchRedis {
  url: string;
  proc: Subprocess;
  /** Scripts Redis has run since it started (EVALSHA and EVAL calls, by INFO commandstats). */
  scripts(): Promise<number>;
}

export async function startRedis(): Promise<BenchRedis> {
  const port = freePort();
  const dir = benchDir("modelgate-bench-redis-");
  const proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir], {
    stdout: "ignore",
    stderr: "ignore",
  });
  killOnExit(proc);
  const url = `redis://127.0.0.1:${port}`;
  for (;;) {
    const probe = new RedisClient(url, { autoReconnect: false, connectionTimeout: 500 });
    const up = await probe.connect().then(
      () => true,
      () => false,
    );
    probe.close();
    if (up) break;
    await Bun.sleep(25);
  }
  const client = new RedisClient(url);
  const scripts = async (): Promise<number> => {
    const info = String(await client.send("INFO", ["commandstats"]));
    const calls = [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)];
    return calls.reduce((sum, [, n]) => sum + Number(n), 0);
  };
  return { url, proc, scripts };
}

export interface ReplicaOptions {
  count: number;
  /** `[cluster] redis_url`; null keeps the limits in each replica's memory. */
  redisUrl: string | null;
  /** `[database] url`; null puts every replica on one SQLite file. */
  databaseUrl: string | null;
}

/** `count` replicas of the binary on the mock upstream, answering /api/health, killed with the bench. */
export async function startReplicas(mockUrl: string, options: ReplicaOptions): Promise<BenchGateway[]> {
  const dir = benchDir("modelgate-bench-cluster-");
  const replicas: BenchGateway[] = [];
  for (let i = 0; i < options.count; i++) {
    const port = freePort();
    const file = join(dir, `replica-${i}.toml`);
    const database = options.databaseUrl === null ? "" : `[database]\nurl = "${options.databaseUrl}"\n\n`;
    const cluster = options.redisUrl === null ? "" : `[cluster]\nredis_url = "${options.redisUrl}"\n\n`;
    // On SQLite the data directory is the shared file's; on Postgres it holds each replica's pid file.
    const data = join(dir, options.databaseUrl === null ? "data" : `data-${i}`);
    writeFileSync(file, `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${data}"\n\n${database}${cluster}${benchConfig(mockUrl)}`);
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

export async function stopReplicas(replicas: BenchGateway[]): Promise<void> {
  for (const r of replicas) {
    r.proc.kill();
    await r.proc.exited;
  }
}
