/**
 * modelgate as a benchmark target: the compiled binary (dist/modelgate) with a config pointing at
 * the mock upstream, limits raised far above what a run can reach (so the bench measures the rate
 * limiter's cost, never its denials), plus the start-up measurements: exec to first healthy
 * /api/health, and RSS idle, after chat requests and after the app's pages. Optionally an API key,
 * once the CLI can create one, with credits for the paid model (BENCH_PAID_MODEL, the same
 * upstream model behind a price: metering on).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { BINARY, freePort } from "../../tests/support/binary";
import { median } from "../load";
import { benchDir } from "../processes";

export const BENCH_MODEL = "mock-small";
export const BENCH_PAID_MODEL = "mock-paid";

/**
 * TOML after the [server] table that startGateway writes. `upstream` adds keys to the upstream's
 * table (the footprint run raises max_connections to hold a thousand streams at once).
 */
export function benchConfig(upstreamBaseUrl: string, options: { upstream?: string[] } = {}): string {
  const huge = 1_000_000_000;
  return [
    "[limits]",
    `anonymous = { per_minute = ${huge}, per_day = ${huge} }`,
    `api_key = { per_minute = ${huge} }`,
    "",
    "[[upstreams]]",
    'name = "mock"',
    `base_url = "${upstreamBaseUrl}"`,
    ...(options.upstream ?? []),
    "",
    "[[models]]",
    `id = "${BENCH_MODEL}"`,
    "free = true",
    `targets = [{ upstream = "mock", model = "${BENCH_MODEL}" }]`,
    "",
    "[[models]]",
    `id = "${BENCH_PAID_MODEL}"`,
    "price = { prompt = 1, completion = 2 }",
    `targets = [{ upstream = "mock", model = "${BENCH_MODEL}" }]`,
    "",
  ].join("\n");
}

export interface BenchGateway {
  url: string;
  proc: Subprocess;
  /** Runs a CLI command of the same binary against the same config. */
  cli(args: string[]): Promise<{ code: number; stdout: string }>;
}

/**
 * Starts the binary with its logs going to a file in its temporary directory, as they would go to
 * a journal: a pipe into this process would make the harness (sharing the load generator's CPU)
 * read every request line.
 */
export async function startModelgate(upstreamBaseUrl: string, binary = BINARY, options: { upstream?: string[] } = {}): Promise<BenchGateway> {
  const dir = benchDir("modelgate-bench-");
  const port = freePort();
  const file = join(dir, "modelgate.toml");
  writeFileSync(file, `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n\n${benchConfig(upstreamBaseUrl, options)}`);
  const env = { ...process.env, MODELGATE_CONFIG: file };
  const log = Bun.file(join(dir, "modelgate.log"));
  const proc = Bun.spawn([binary, "serve"], { cwd: dir, env, stdout: log, stderr: log, stdin: "ignore" });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  while (
    !(await fetch(`${url}/api/health`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (proc.exitCode !== null || Date.now() > deadline) {
      proc.kill();
      throw new Error(`modelgate did not become healthy (log: ${join(dir, "modelgate.log")})`);
    }
    await Bun.sleep(20);
  }
  return {
    url,
    proc,
    cli: async (args) => {
      const child = Bun.spawn([binary, ...args], { cwd: dir, env, stdout: "pipe", stderr: "ignore", stdin: "ignore" });
      const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
      return { code, stdout };
    },
  };
}

/**
 * Creates a user with a million credits (far more than a run spends on the paid model) and an
 * API key, through the CLI; null while the binary has no such commands (the API-key scenarios
 * then stay out of the table).
 */
/** `policy`: key policy flags for `key create` (bench/ab.ts's AB_POLICY_B). */
export async function createApiKey(gateway: BenchGateway, policy: string[] = []): Promise<string | null> {
  const email = "bench@modelgate.invalid";
  const user = await gateway.cli(["user", "add", email]);
  if (user.code !== 0) return null;
  const grant = await gateway.cli(["credits", "grant", "--user", email, "--amount", "1000000"]);
  if (grant.code !== 0) return null;
  const key = await gateway.cli(["key", "create", "--user", email, "--name", "bench", ...policy]);
  return key.code === 0 ? (key.stdout.match(/sk-mg-[A-Za-z0-9_-]+/)?.[0] ?? null) : null;
}

/** A /proc/PID/status field in MB (Linux only). */
export function statusMb(pid: number, field: "VmRSS" | "RssAnon" | "RssFile"): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(status.match(new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m"))?.[1] ?? NaN) / 1024;
}

/** Resident set of a process in MB. */
export function rssMb(pid: number): number {
  return statusMb(pid, "VmRSS");
}

export interface RssSplit {
  /** VmRSS, and of it anonymous memory (heap, stacks) and file-backed pages (the mapped executable), in MB. */
  rss: number;
  anon: number;
  file: number;
}

export interface StartupResult {
  /** Median ms from spawn to the first 200 of /api/health, database already created. */
  warmMs: number;
  /** The same for the very first start (creates the database, applies migrations). */
  coldMs: number;
  starts: number;
  /** A fresh process that has answered /api/health, left idle a moment: issue 34's "idle". */
  idle: RssSplit;
  /** The same process after 20 chat requests, left idle a moment. */
  afterChat: RssSplit;
  /** Then after one request each to /api/status, /metrics, the dashboard and Swagger: the whole app built. */
  afterPages: RssSplit;
}

export async function measureStartup(upstreamBaseUrl: string, options: { starts: number; pin: (pid: number) => void }): Promise<StartupResult> {
  const dir = benchDir("modelgate-bench-start-");
  const file = join(dir, "modelgate.toml");
  const times: number[] = [];
  let rss: Pick<StartupResult, "idle" | "afterChat" | "afterPages"> | null = null;
  for (let i = 0; i <= options.starts; i++) {
    const port = freePort();
    writeFileSync(file, `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n\n${benchConfig(upstreamBaseUrl)}`);
    const started = performance.now();
    const proc = Bun.spawn([BINARY, "serve"], { cwd: dir, env: { ...process.env, MODELGATE_CONFIG: file }, stdout: "ignore", stderr: "ignore" });
    options.pin(proc.pid);
    const url = `http://127.0.0.1:${port}`;
    const deadline = started + 10_000;
    for (;;) {
      if (proc.exitCode !== null) throw new Error(`modelgate exited with ${proc.exitCode} during the start-up measurement`);
      const ok = await fetch(`${url}/api/health`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) break;
      if (performance.now() > deadline) throw new Error("modelgate did not become healthy within 10 s");
      await Bun.sleep(1);
    }
    times.push(performance.now() - started);
    if (i === options.starts) rss = await rssSteps(proc.pid, url);
    proc.kill("SIGTERM");
    await proc.exited;
  }
  return { coldMs: times[0], warmMs: median(times.slice(1)), starts: times.length, ...rss! };
}

function rssSplit(pid: number): RssSplit {
  return { rss: statusMb(pid, "VmRSS"), anon: statusMb(pid, "RssAnon"), file: statusMb(pid, "RssFile") };
}

/** RSS idle, then after 20 chat requests, then after the pages that build the app. */
async function rssSteps(pid: number, url: string): Promise<Pick<StartupResult, "idle" | "afterChat" | "afterPages">> {
  await Bun.sleep(500);
  const idle = rssSplit(pid);
  const body = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: "user", content: "hi" }] });
  for (let i = 0; i < 20; i++) {
    await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body }).then((r) => r.text());
  }
  await Bun.sleep(500);
  const afterChat = rssSplit(pid);
  for (const path of ["/api/status", "/metrics", "/dashboard", "/swagger", "/swagger/json"])
    await fetch(`${url}${path}`, { redirect: "manual" }).then((r) => r.text());
  await Bun.sleep(500);
  return { idle, afterChat, afterPages: rssSplit(pid) };
}
