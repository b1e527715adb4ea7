/**
 * /v1/responses on loopback against the compiled binary, beside chat in the same run: passed
 * through to an upstream that serves Responses (`native`) and translated to chat completions,
 * each JSON and streamed. Per row: req/s under wrk (c=32), and the gateway's CPU per request
 * (its process's user+system time over the wrk run, divided by the requests served); from them,
 * what translation costs over native (per non-streamed request, and per streamed event: the
 * chat chunks one answer has, also against chat's stream relayed as it is), and the time to the
 * first text of a translated stream against chat's.
 * Runs inside `make bench` (bench/run.ts calls runResponsesBench) or alone: `bun bench/responses.ts`.
 * Every child process is ended before returning.
 */
import { median, processCpuMs, runWrk, type Scenario } from "./load";
import { startBenchGateway, type LoopbackBenchOptions } from "./support/gateway";

/** Chat chunks in one streamed mock answer (six words, the finish, the usage), for the per-event figure. */
const CHAT_EVENTS = 8;
const PROMPT = "Say hello in one short sentence.";
const ROUNDS = 4;

export async function runResponsesBench(options: LoopbackBenchOptions = {}): Promise<string> {
  const bench = await startBenchGateway(
    (mockUrl) => `
[[upstreams]]
name = "chat"
base_url = "${mockUrl}"
[[upstreams]]
name = "native"
base_url = "${mockUrl}"
native = ["responses"]
[[models]]
id = "translated"
free = true
targets = [{ upstream = "chat", model = "mock-small" }]
[[models]]
id = "native"
free = true
targets = [{ upstream = "native", model = "mock-small" }]
`,
    options,
  );
  try {
    const { gateway } = bench;
    const base = `${gateway.url}/v1`;
    const scenario = (name: string, path: string, body: Record<string, unknown>): Scenario => ({
      name,
      url: `${base}${path}`,
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    const chat = (stream: boolean): Scenario =>
      scenario(`chat${stream ? " stream" : ""}`, "/chat/completions", { model: "translated", stream, messages: [{ role: "user", content: PROMPT }] });
    // store: false, as Codex sends: the comparison is of translation, not of the database.
    const responses = (model: string, stream: boolean): Scenario =>
      scenario(`responses ${model}${stream ? " stream" : ""}`, "/responses", { model, stream, store: false, input: PROMPT });
    const scenarios = [
      chat(false),
      chat(true),
      responses("native", false),
      responses("native", true),
      responses("translated", false),
      responses("translated", true),
    ];
    for (const s of scenarios) {
      const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
      const text = await response.text();
      if (!response.ok || (s.name.includes("responses") && s.name.includes("stream") && !text.includes("response.completed")))
        throw new Error(`${s.name}: HTTP ${response.status} ${text.slice(0, 200)}`);
    }
    const durationS = Math.max(1, (options.durationS ?? 3) - 1);
    // Rounds of every scenario in turn, so that load drifting on the shared machine hits each alike; medians.
    const runs = new Map<string, { rps: number[]; cpuUs: number[] }>(scenarios.map((s) => [s.name, { rps: [], cpuUs: [] }]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of scenarios) {
        const before = processCpuMs(gateway.proc.pid);
        const run = await runWrk(s, { connections: options.concurrency ?? 32, durationS, cpus: options.clientCpus ?? null });
        if (round === 0) continue; // warm-up
        runs.get(s.name)!.rps.push(run.rps);
        runs.get(s.name)!.cpuUs.push(((processCpuMs(gateway.proc.pid) - before) * 1000) / run.requests);
      }
    }
    const streams = [chat(true), responses("native", true), responses("translated", true)];
    const firsts = new Map<string, { byte: number[]; text: number[] }>(streams.map((s) => [s.name, { byte: [], text: [] }]));
    for (let i = 0; i < 600; i++) {
      for (const s of streams) {
        const first = await firstByteAndText(s);
        if (i >= 100) {
          firsts.get(s.name)!.byte.push(first.byte);
          firsts.get(s.name)!.text.push(first.text);
        }
      }
    }
    await gateway.stop();
    const cpu = (name: string): number => median(runs.get(name)!.cpuUs);
    const ttfb = new Map([...firsts].map(([name, f]) => [name, { byte: median(f.byte), text: median(f.text) }]));
    const perRequest = cpu("responses translated") - cpu("responses native");
    const perEvent = (cpu("responses translated stream") - cpu("responses native stream")) / CHAT_EVENTS;
    const overChat = (cpu("responses translated stream") - cpu("chat stream")) / CHAT_EVENTS;
    const ttfbGap = ttfb.get("responses translated stream")!.text - ttfb.get("chat stream")!.text;
    const cell = (name: string, key: "byte" | "text"): string => (ttfb.has(name) ? ttfb.get(name)![key].toFixed(3) : "");
    return [
      "### Responses API (bench/responses.ts)",
      "",
      `| scenario | req/s at c=${options.concurrency ?? 32} | gateway CPU µs per request | first byte, p50 ms | first text delta, p50 ms |`,
      "|---|---:|---:|---:|---:|",
      ...scenarios.map(
        (s) => `| ${s.name} | ${Math.round(median(runs.get(s.name)!.rps))} | ${cpu(s.name).toFixed(0)} | ${cell(s.name, "byte")} | ${cell(s.name, "text")} |`,
      ),
      "",
      `- Translation over native, per non-streamed request: ${perRequest.toFixed(1)} µs CPU (target ≤ 10: ${perRequest <= 10 ? "within" : "ABOVE"}).`,
      `- Translation over native, per streamed event (${CHAT_EVENTS} chat chunks an answer): ${perEvent.toFixed(2)} µs CPU (target ≤ 2: ${perEvent <= 2 ? "within" : "ABOVE"}). The mock's native stream has more events than its chat stream (14 against ${CHAT_EVENTS}), so this flatters translation; over chat's own stream relayed as it is (the same upstream events): ${overChat.toFixed(2)} µs per event.`,
      `- First text delta of a translated stream minus chat's first content chunk: ${ttfbGap.toFixed(3)} ms (target ≤ 0.1: ${ttfbGap <= 0.1 ? "within" : "ABOVE"}). Its first bytes (response.created, then the first item and its delta) leave with the upstream's first chunk, rewritten inside the relay.`,
      `- Medians of ${ROUNDS - 1} rounds (after a warm-up round) of ${durationS} s per scenario, interleaved; first bytes over 500 sequential requests each, interleaved. CPU per request is the whole process's time over a run divided by its requests: on a shared machine it carries others' noise; compare rows of one run.`,
    ].join("\n");
  } finally {
    bench.close();
  }
}

/** Times to the first body bytes and to the first text (chat's first content, Responses' first output_text.delta) of one streamed request, ms. */
async function firstByteAndText(s: Scenario): Promise<{ byte: number; text: number }> {
  const started = performance.now();
  const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let byte = -1;
  let text = -1;
  let seen = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (byte < 0) byte = performance.now() - started;
    if (text < 0) {
      seen += decoder.decode(value, { stream: true });
      if (seen.includes('"content":"') || seen.includes("response.output_text.delta")) text = performance.now() - started;
    }
  }
  return { byte, text };
}

if (import.meta.main) {
  console.log(await runResponsesBench());
}
