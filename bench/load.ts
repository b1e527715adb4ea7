/**
 * The load generators of the benchmark. Throughput and closed-loop latency come from wrk (Debian's
 * package: a C client cheap enough to share a 2-core machine with the servers it measures), driven
 * by a generated Lua script that sets the POST body and prints wrk's own percentiles as one JSON
 * line. Time to first byte of a stream comes from a sequential fetch client in this process, since
 * wrk cannot see inside a response; its own overhead is the same for every target.
 * Invariants: every run is bounded by a duration and a request count; nothing leaves loopback.
 */
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchDir } from "./processes";

/** One thing to measure: a POST of `body` to `url` with `headers`. Adding a case is one object. */
export interface Scenario {
  name: string;
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface WrkResult {
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Socket errors, timeouts and non-2xx answers together. */
  errors: number;
}

export interface WrkOptions {
  connections: number;
  durationS: number;
  /** CPUs wrk is pinned to (taskset list), or null to let the scheduler place it. */
  cpus: string | null;
  /** Run at the lowest priority (nice 19): a load that stands for other machines, yielding its CPU to the measured client. */
  background?: boolean;
}

const scriptDir = benchDir("modelgate-bench-");
let scripts = 0;

/** The wrk Lua script: method, headers and body, and a done() that prints one JSON line. */
function luaScript(scenario: Scenario): string {
  const quote = (s: string): string => `[==[${s}]==]`;
  const headers = Object.entries(scenario.headers).map(([k, v]) => `wrk.headers[ ${quote(k)} ] = ${quote(v)}`);
  return [
    'wrk.method = "POST"',
    `wrk.body = ${quote(scenario.body)}`,
    ...headers,
    "done = function(summary, latency, requests)",
    "  local e = summary.errors",
    '  io.write(string.format("WRKJSON {\\"requests\\":%d,\\"duration_us\\":%d,\\"p50_us\\":%d,\\"p99_us\\":%d,\\"errors\\":%d}\\n",',
    "    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),",
    "    e.connect + e.read + e.write + e.status + e.timeout))",
    "end",
    "",
  ].join("\n");
}

export async function runWrk(scenario: Scenario, options: WrkOptions): Promise<WrkResult> {
  const file = join(scriptDir, `s${scripts++}.lua`);
  writeFileSync(file, luaScript(scenario));
  // One wrk thread per CPU it may use: more threads than cores only add context switches.
  const threads = Math.min(options.cpus === null ? 2 : options.cpus.split(",").length, options.connections);
  const wrk = ["wrk", `-t${threads}`, `-c${options.connections}`, `-d${options.durationS}s`, "--timeout", "5s", "-s", file, scenario.url];
  const pinned = options.cpus === null ? wrk : ["taskset", "-c", options.cpus, ...wrk];
  const argv = options.background ? ["nice", "-n", "19", ...pinned] : pinned;
  const proc = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const line = stdout.split("\n").find((l) => l.startsWith("WRKJSON "));
  if (code !== 0 || !line) throw new Error(`wrk failed for ${scenario.name} (exit ${code}):\n${stdout}${stderr}`);
  const r = JSON.parse(line.slice("WRKJSON ".length)) as { requests: number; duration_us: number; p50_us: number; p99_us: number; errors: number };
  return { requests: r.requests, rps: r.requests / (r.duration_us / 1e6), p50Ms: r.p50_us / 1000, p99Ms: r.p99_us / 1000, errors: r.errors };
}

export interface StreamResult {
  requests: number;
  ttfbP50Ms: number;
  ttfbP99Ms: number;
  totalP50Ms: number;
  totalP99Ms: number;
  errors: number;
}

/**
 * Sequential streamed requests (concurrency 1) for `durationMs` or `maxRequests`, whichever ends
 * first. TTFB is the time until the first body chunk (the first SSE event) arrives; total is the
 * time until the body ends.
 */
export async function measureStream(scenario: Scenario, options: { durationMs: number; maxRequests: number }): Promise<StreamResult> {
  const ttfb: number[] = [];
  const total: number[] = [];
  let errors = 0;
  const deadline = performance.now() + options.durationMs;
  while (performance.now() < deadline && ttfb.length + errors < options.maxRequests) {
    const started = performance.now();
    try {
      const response = await fetch(scenario.url, { method: "POST", headers: scenario.headers, body: scenario.body });
      const reader = response.body!.getReader();
      let first = -1;
      let text = "";
      const decoder = new TextDecoder();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (first < 0 && value.byteLength > 0) first = performance.now();
        text += decoder.decode(value, { stream: true });
      }
      const ended = performance.now();
      if (!response.ok || first < 0 || !text.includes("data: [DONE]")) {
        errors++;
        continue;
      }
      ttfb.push(first - started);
      total.push(ended - started);
    } catch {
      errors++;
    }
  }
  return {
    requests: ttfb.length,
    ttfbP50Ms: percentile(ttfb, 50),
    ttfbP99Ms: percentile(ttfb, 99),
    totalP50Ms: percentile(total, 50),
    totalP99Ms: percentile(total, 99),
    errors,
  };
}

const CLOCK_TICKS = Number(Bun.spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/**
 * CPU time (user + system, all threads) a process has used so far, ms, from /proc. Unlike
 * latency, CPU per request barely moves when other work shares the machine.
 */
/** /proc/PID/stat after the command name: field 4 (ppid) is at index 1, utime at 11. */
function statFields(pid: number | string): string[] {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}

export function processCpuMs(pid: number): number {
  const fields = statFields(pid);
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/**
 * CPU ms of `pid` and its children, live or exited (a server of one process per connection, as
 * Postgres is): its own time, the time of the children it has waited for, and each live child's.
 */
export function processTreeCpuMs(pid: number): number {
  const own = statFields(pid);
  let ticks = Number(own[11]) + Number(own[12]) + Number(own[13]) + Number(own[14]);
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = statFields(entry);
      if (Number(fields[1]) === pid) ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // The process ended between the listing and the read.
    }
  }
  return (ticks * 1000) / CLOCK_TICKS;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

export function median(values: number[]): number {
  return percentile(values, 50);
}
