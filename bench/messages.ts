/**
 * /v1/messages on loopback against the compiled binary: native (the mock's own /v1/messages
 * passed through) and translated (to the mock's chat completions and back), whole and streamed,
 * beside chat on the same mock. Each row: req/s under load and the gateway's CPU per request
 * (/proc), the median of ROUNDS rounds that each run every call in turn, so that load drifting
 * on the machine hits each alike; from those, what translation costs over native per request and
 * per streamed event, as the median of each round's difference. And the time to first byte of a
 * translated stream against chat's, sequential requests interleaved the same way. On a shared
 * machine the loopback figures carry the other work's noise, so the same costs are also measured
 * in-process (process.cpuUsage over many calls of the adapter's own functions), where only the
 * translation runs.
 * Runs inside `make bench` (bench/run.ts calls runMessagesBench) or alone: `bun bench/messages.ts`.
 * Every child process is ended before returning.
 */
import { median, processCpuMs, runWrk, type Scenario } from "./load";
import { startBenchGateway, type LoopbackBenchOptions } from "./support/gateway";
import { messagesAdapter } from "../src/router/adapters/messages";
import { relaySse } from "../src/router/sse";
import type { CallBody } from "../src/router/adapters/types";
import type { ModelRoute, Target } from "../src/router/registry";

const PROMPT = "Say hello in one short sentence.";
const ROUNDS = 5;
/** The events of one streamed answer from the mock: chat's chunks (6 words, the finish, usage, [DONE]) the translation reads. */
const CHAT_EVENTS_PER_STREAM = 9;

interface Row {
  name: string;
  rps: number;
  cpuUs: number;
}

export async function runMessagesBench(options: LoopbackBenchOptions = {}): Promise<string> {
  const bench = await startBenchGateway(
    (mockUrl) => `
[[upstreams]]
name = "native"
base_url = "${mockUrl}"
native = ["messages"]
[[upstreams]]
name = "chat"
base_url = "${mockUrl}"
[[models]]
id = "native"
free = true
targets = [{ upstream = "native", model = "mock-small" }]
[[models]]
id = "translated"
free = true
targets = [{ upstream = "chat", model = "mock-small" }]
`,
    options,
  );
  try {
    const { gateway } = bench;
    const pid = gateway.proc.pid;
    const json = { "content-type": "application/json" };
    const chat = (stream: boolean): Scenario => ({
      name: `chat${stream ? ", streamed" : ""}`,
      url: `${gateway.url}/v1/chat/completions`,
      headers: json,
      body: JSON.stringify({ model: "translated", messages: [{ role: "user", content: PROMPT }], ...(stream ? { stream: true } : {}) }),
    });
    const messages = (model: "native" | "translated", stream: boolean): Scenario => ({
      name: `messages ${model}${stream ? ", streamed" : ""}`,
      url: `${gateway.url}/v1/messages`,
      headers: { ...json, "anthropic-version": "2023-06-01" },
      body: JSON.stringify({ model, max_tokens: 256, messages: [{ role: "user", content: PROMPT }], ...(stream ? { stream: true } : {}) }),
    });
    const scenarios = [
      chat(false),
      messages("native", false),
      messages("translated", false),
      chat(true),
      messages("native", true),
      messages("translated", true),
    ];
    for (const s of scenarios) {
      const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
      if (!response.ok) throw new Error(`${s.name}: HTTP ${response.status} ${(await response.text()).slice(0, 200)}`);
      await response.arrayBuffer();
    }
    const load = { connections: options.concurrency ?? 32, durationS: 1, cpus: options.clientCpus ?? null };
    for (const s of scenarios) await runWrk(s, load);
    const runs = new Map<string, Row[]>(scenarios.map((s) => [s.name, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of scenarios) {
        const cpuBefore = processCpuMs(pid);
        const run = await runWrk(s, load);
        if (run.errors > 0) throw new Error(`${s.name}: ${run.errors} errors under load`);
        runs.get(s.name)!.push({ name: s.name, rps: run.rps, cpuUs: ((processCpuMs(pid) - cpuBefore) * 1000) / run.requests });
      }
    }
    const ttfb = await firstBytes([chat(true), messages("translated", true)], 8, 100);
    await gateway.stop();
    const rows: Row[] = scenarios.map((s) => ({
      name: s.name,
      rps: median(runs.get(s.name)!.map((r) => r.rps)),
      cpuUs: median(runs.get(s.name)!.map((r) => r.cpuUs)),
    }));
    /** The median over rounds of `a`'s CPU per request less `b`'s in the same round. */
    const over = (a: string, b: string): number => median(runs.get(a)!.map((run, i) => run.cpuUs - runs.get(b)![i].cpuUs));
    const wholeCost = over("messages translated", "messages native");
    const eventCost = over("messages translated, streamed", "messages native, streamed") / CHAT_EVENTS_PER_STREAM;
    const inProcess = await translationInProcess();
    const ttfbChat = median(ttfb.get("chat, streamed")!);
    const ttfbTranslated = median(ttfb.get("messages translated, streamed")!);
    return [
      "### Messages API (bench/messages.ts)",
      "",
      `| call | req/s at c=${options.concurrency ?? 32}, median of ${ROUNDS} | gateway CPU µs per request, median |`,
      "|---|---:|---:|",
      ...rows.map((row) => `| ${row.name} | ${Math.round(row.rps)} | ${Math.round(row.cpuUs)} |`),
      "",
      `- Translation over native, whole: ${wholeCost.toFixed(1)} µs CPU per request (target ≤ 10: ${wholeCost <= 10 ? "met" : "NOT met"}).`,
      `- Translation over native, streamed: ${eventCost.toFixed(2)} µs CPU per upstream event (${CHAT_EVENTS_PER_STREAM} per answer; target ≤ 2: ${eventCost <= 2 ? "met" : "NOT met"}).`,
      `- In-process, the adapter's own work: ${inProcess.wholeUs.toFixed(1)} µs CPU per translated whole request over native (translate, serialize, parse the answer, translate it back); ${inProcess.eventUs.toFixed(2)} µs per chat event translated by the relay's rewriter over the relay passing it on (parse, translate, encode).`,
      `- Time to first byte, p50 of ${ttfb.get("chat, streamed")!.length} sequential streams each: chat ${ttfbChat.toFixed(3)} ms, translated Messages ${ttfbTranslated.toFixed(3)} ms (difference ${(ttfbTranslated - ttfbChat).toFixed(3)} ms; target ≤ 0.1: ${ttfbTranslated - ttfbChat <= 0.1 ? "met" : "NOT met"}).`,
      "- CPU per request comes from /proc at 10 ms ticks over whole runs; on a shared machine the rates move with other work, the CPU figures far less.",
    ].join("\n");
  } finally {
    bench.close();
  }
}

/** CPU µs of `run`, per call: the median of 7 rounds of `iterations` calls, after one warm-up round. */
async function cpuMicros(iterations: number, run: () => unknown): Promise<number> {
  const times: number[] = [];
  for (let round = 0; round <= 7; round++) {
    const before = process.cpuUsage();
    for (let i = 0; i < iterations; i++) await run();
    const used = process.cpuUsage(before);
    if (round > 0) times.push((used.user + used.system) / iterations);
  }
  return median(times);
}

/** The translated path's own work beside the native one's, in this process: per whole request, and per event of a stream. */
async function translationInProcess(): Promise<{ wholeUs: number; eventUs: number }> {
  const target = { model: "mock-small", upstream: { config: { native: [], token_limit_field: "max_tokens" } } } as unknown as Target;
  const route = { targets: [target] } as unknown as ModelRoute;
  const request = JSON.stringify({ model: "translated", max_tokens: 256, system: "Be brief.", messages: [{ role: "user", content: PROMPT }] });
  const answer = JSON.stringify({
    id: "chatcmpl-1",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: "Hello from the mock upstream." }, finish_reason: "stop" }],
    usage: { prompt_tokens: 12, completion_tokens: 6 },
  });
  const native = (): string => {
    const body = JSON.parse(request) as CallBody;
    return JSON.stringify({ ...body, model: target.model }) + answer;
  };
  const translated = (): string => {
    const body = JSON.parse(request) as CallBody;
    messagesAdapter.checkRoute!(body, route);
    return JSON.stringify(messagesAdapter.payload!(body, target, null)) + messagesAdapter.transformWhole!(answer, body, target);
  };
  const wholeUs = (await cpuMicros(20_000, translated)) - (await cpuMicros(20_000, native));
  const chunk = (delta: Record<string, unknown>, finish: string | null = null): string =>
    `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
  const words = Array.from({ length: 100 }, (_, i) => ` word${i}`);
  const sse = new TextEncoder().encode(
    chunk({ role: "assistant", content: "" }) +
      words.map((w) => chunk({ content: w })).join("") +
      chunk({}, "stop") +
      `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 12, completion_tokens: 100 } })}\n\ndata: [DONE]\n\n`,
  );
  const events = words.length + 4;
  /** The chat stream as an upstream sends it: a read per event. */
  const bytes = (): ReadableStream<Uint8Array> => {
    let at = 0;
    return new ReadableStream({
      pull(controller) {
        const end = sse.indexOf(10, sse.indexOf(10, at) + 1) + 1;
        controller.enqueue(sse.subarray(at, end));
        at = end;
        if (at >= sse.length) controller.close();
      },
    });
  };
  /** The relay's stream of it, as the pipeline makes it: translated (the adapter's rewriter) or passed on. */
  const relayed = (translate: boolean): ReadableStream<Uint8Array> => {
    const body = { model: "translated", max_tokens: 256, messages: [] } as unknown as CallBody;
    return relaySse(bytes(), {
      clientWantsUsage: true,
      idleTimeoutMs: 60_000,
      streamTimeoutMs: 60_000,
      abortUpstream: () => {},
      onEnd: () => {},
      rewrite: translate ? (messagesAdapter.rewriteEvents!(body, target) ?? undefined) : undefined,
    });
  };
  const drain = async (stream: ReadableStream<Uint8Array>): Promise<void> => {
    const reader = stream.getReader();
    while (!(await reader.read()).done);
  };
  // Rounds of each in turn, the median of their differences: load drifting on a shared machine hits both alike.
  const differences: number[] = [];
  for (let round = 0; round < 9; round++) {
    const through = await cpuMicros(100, () => drain(relayed(false)));
    const rewritten = await cpuMicros(100, () => drain(relayed(true)));
    differences.push((rewritten - through) / events);
  }
  return { wholeUs, eventUs: median(differences) };
}

/** Time to the first byte of each streamed answer, ms: the scenarios in turn, `perRound` each, for `rounds` rounds. */
async function firstBytes(scenarios: Scenario[], rounds: number, perRound: number): Promise<Map<string, number[]>> {
  const times = new Map<string, number[]>(scenarios.map((s) => [s.name, []]));
  for (let round = 0; round < rounds; round++) {
    for (const s of scenarios) {
      for (let i = 0; i < perRound; i++) {
        const started = performance.now();
        const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
        const reader = response.body!.getReader();
        let first = -1;
        for (let read = await reader.read(); !read.done; read = await reader.read()) if (first < 0 && read.value.byteLength > 0) first = performance.now();
        if (round > 0) times.get(s.name)!.push(first - started);
      }
    }
  }
  return times;
}

if (import.meta.main) {
  console.log(await runMessagesBench());
}
