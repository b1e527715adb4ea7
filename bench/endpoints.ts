/**
 * The model endpoints beside chat, on loopback against the compiled binary: the gateway's own
 * overhead (the x-gateway-overhead-ms it reports, and the latency it adds to the mock called
 * directly) for chat, embeddings and completions in the same run, requests interleaved so that
 * load drifting on the machine hits each alike; and the memory a 20 MB transcription upload costs
 * (resident set growth while it streams through, the file sent before the model and after it).
 * Runs inside `make bench` (bench/run.ts calls runEndpointsBench) or alone: `bun bench/endpoints.ts`.
 * Every child process is ended before returning.
 */
import { readFileSync } from "node:fs";
import { median, runWrk, type Scenario } from "./load";
import { startBenchGateway, type LoopbackBenchOptions } from "./support/gateway";

const BODIES: Record<string, [path: string, body: Record<string, unknown>]> = {
  chat: ["/chat/completions", { model: "m", messages: [{ role: "user", content: "Say hello in one short sentence." }] }],
  embeddings: ["/embeddings", { model: "m", input: "Say hello in one short sentence." }],
  completions: ["/completions", { model: "m", prompt: "Say hello in one short sentence." }],
};

const UPLOAD_BYTES = 20 * 1024 * 1024;

export async function runEndpointsBench(options: LoopbackBenchOptions = {}): Promise<string> {
  const bench = await startBenchGateway(
    (mockUrl) => `
[server]
max_body_bytes = ${32 * 1024 * 1024}
[[upstreams]]
name = "mock"
base_url = "${mockUrl}"
[[models]]
id = "m"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`,
    options,
  );
  try {
    const { gateway, mockUrl } = bench;
    const names = Object.keys(BODIES);
    const scenario = (name: string, base: string, model: string): Scenario => {
      const [path, body] = BODIES[name];
      return { name, url: `${base}${path}`, headers: { "content-type": "application/json" }, body: JSON.stringify({ ...body, model }) };
    };
    const through = names.map((name) => scenario(name, `${gateway.url}/v1`, "m"));
    const direct = names.map((name) => scenario(name, mockUrl, "mock-small"));
    const { latency, overhead } = await interleaved([...through, ...direct.map((s) => ({ ...s, name: `${s.name} direct` }))], 8, 150);
    const durationS = Math.max(1, (options.durationS ?? 3) - 1);
    const rps = new Map<string, number>();
    for (const s of through) rps.set(s.name, (await runWrk(s, { connections: options.concurrency ?? 32, durationS, cpus: options.clientCpus ?? null })).rps);
    const rss = await uploadRss(gateway.url, gateway.proc.pid);
    await gateway.stop();
    // The header has hundredths of a millisecond: a mean resolves what a median of it cannot.
    const chatOverhead = mean(overhead.get("chat")!);
    const rows = names.map((name) => {
      const own = mean(overhead.get(name)!);
      const added = median(latency.get(name)!) - median(latency.get(`${name} direct`)!);
      return `| ${name} | ${f(own)} | ${(own / chatOverhead).toFixed(2)}× | ${f(added)} | ${Math.round(rps.get(name)!)} |`;
    });
    const worst = Math.max(...names.filter((name) => name !== "chat").map((name) => mean(overhead.get(name)!) / chatOverhead));
    return [
      "### Endpoints (bench/endpoints.ts)",
      "",
      "| endpoint | gateway overhead, mean ms (x-gateway-overhead-ms) | vs chat | p50 ms added vs the mock directly | req/s at c=" +
        (options.concurrency ?? 32) +
        " |",
      "|---|---:|---:|---:|---:|",
      ...rows,
      "",
      `- Overhead of embeddings and completions within 1.1× of chat's: ${worst <= 1.1 ? "yes" : "NO"} (largest ratio ${worst.toFixed(2)}×).`,
      `- A ${UPLOAD_BYTES / 1024 / 1024} MB transcription upload: resident set growth ${rss.modelFirst.toFixed(1)} MB with the model field first, ${rss.fileFirst.toFixed(1)} MB with the file first (kept in a temporary file until the model arrives); bound 5 MB: ${Math.max(rss.modelFirst, rss.fileFirst) < 5 ? "within" : "ABOVE"}.`,
    ].join("\n");
  } finally {
    bench.close();
  }
}

/** Sequential requests, each scenario in turn per round: client latency, and the gateway's own overhead header where sent. */
async function interleaved(
  scenarios: Scenario[],
  rounds: number,
  perRound: number,
): Promise<{ latency: Map<string, number[]>; overhead: Map<string, number[]> }> {
  const latency = new Map<string, number[]>(scenarios.map((s) => [s.name, []]));
  const overhead = new Map<string, number[]>(scenarios.map((s) => [s.name, []]));
  for (const s of scenarios) for (let i = 0; i < 50; i++) await (await fetch(s.url, { method: "POST", headers: s.headers, body: s.body })).arrayBuffer();
  for (let round = 0; round < rounds; round++) {
    for (const s of scenarios) {
      for (let i = 0; i < perRound; i++) {
        const started = performance.now();
        const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
        await response.arrayBuffer();
        latency.get(s.name)!.push(performance.now() - started);
        const own = response.headers.get("x-gateway-overhead-ms");
        if (own !== null) overhead.get(s.name)!.push(Number(own));
      }
    }
  }
  return { latency, overhead };
}

/** Resident set of a process, MB (Linux). */
function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) / 1024 : Number.NaN;
}

/** The most the gateway's resident set grows while a 20 MB upload streams through it, sampled every 5 ms, after a small upload warmed the path. */
export async function uploadRss(url: string, pid: number): Promise<{ modelFirst: number; fileFirst: number }> {
  const send = async (bytes: number, modelFirst: boolean): Promise<number> => {
    const form = new FormData();
    const file = new Blob([new Uint8Array(bytes).fill(0x52)], { type: "audio/wav" });
    if (modelFirst) form.append("model", "m");
    form.append("file", file, "big.wav");
    if (!modelFirst) form.append("model", "m");
    Bun.gc(true);
    await Bun.sleep(200);
    const before = rssMb(pid);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 5);
    const response = await fetch(`${url}/v1/audio/transcriptions`, { method: "POST", body: form });
    const text = await response.text();
    clearInterval(sampler);
    if (!response.ok) throw new Error(`upload: HTTP ${response.status} ${text.slice(0, 200)}`);
    return peak - before;
  };
  await send(1024 * 1024, true);
  await send(1024 * 1024, false);
  return { modelFirst: await send(UPLOAD_BYTES, true), fileFirst: await send(UPLOAD_BYTES, false) };
}

function mean(values: number[]): number {
  return values.reduce((sum, v) => sum + v, 0) / values.length;
}

function f(ms: number): string {
  return ms.toFixed(3);
}

if (import.meta.main) {
  console.log(await runEndpointsBench());
}
