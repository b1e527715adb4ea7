/**
 * /v1/messages on loopback against the compiled binary: native (the mock's own /v1/messages
 * passed through) and translated (to the mock's chat completions and back), whole and streamed,
 * beside chat on the same mock. Each row: req/s under load and the gateway's CPU per request
 * (/proc, so it barely moves with other work on the machine); from those, what translation costs
 * over native per request and per streamed event. And the time to first byte of a translated
 * stream against chat's, sequential requests interleaved so drift hits both alike.
 * Runs inside `make bench` (bench/run.ts calls runMessagesBench) or alone: `bun bench/messages.ts`.
 * Every child process is ended before returning.
 */
import type { Subprocess } from "bun";
import { freePort, startGateway } from "../tests/support/binary";
import { median, processCpuMs, runWrk, type Scenario } from "./load";
import { benchDir, startMock } from "./processes";

export interface MessagesBenchOptions {
  mockUrl?: string;
  pin?: (pid: number) => void;
  clientCpus?: string | null;
  durationS?: number;
  concurrency?: number;
}

const PROMPT = "Say hello in one short sentence.";
/** The events of one streamed answer from the mock: chat's chunks (6 words, the finish, usage, [DONE]) the translation reads. */
const CHAT_EVENTS_PER_STREAM = 9;

interface Row {
  name: string;
  rps: number;
  cpuUs: number;
}

export async function runMessagesBench(options: MessagesBenchOptions = {}): Promise<string> {
  const children: Subprocess[] = [];
  try {
    let mockUrl = options.mockUrl;
    if (!mockUrl) {
      const mock = await startMock(freePort(), null);
      children.push(mock.proc);
      mockUrl = mock.url;
    }
    const huge = 1_000_000_000;
    const gateway = await startGateway(
      `
[limits]
anonymous = { per_minute = ${huge}, per_day = ${huge} }
[log]
requests = false
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
      { dir: benchDir("modelgate-bench-") },
    );
    children.push(gateway.proc as unknown as Subprocess);
    options.pin?.(gateway.proc.pid);
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
    const scenarios = [chat(false), messages("native", false), messages("translated", false), chat(true), messages("native", true), messages("translated", true)];
    for (const s of scenarios) {
      const response = await fetch(s.url, { method: "POST", headers: s.headers, body: s.body });
      if (!response.ok) throw new Error(`${s.name}: HTTP ${response.status} ${(await response.text()).slice(0, 200)}`);
      await response.arrayBuffer();
    }
    const durationS = Math.max(1, (options.durationS ?? 3) - 1);
    const rows: Row[] = [];
    for (const s of scenarios) {
      await runWrk(s, { connections: options.concurrency ?? 32, durationS: 1, cpus: options.clientCpus ?? null });
      const cpuBefore = processCpuMs(pid);
      const run = await runWrk(s, { connections: options.concurrency ?? 32, durationS, cpus: options.clientCpus ?? null });
      if (run.errors > 0) throw new Error(`${s.name}: ${run.errors} errors under load`);
      rows.push({ name: s.name, rps: run.rps, cpuUs: ((processCpuMs(pid) - cpuBefore) * 1000) / run.requests });
    }
    const ttfb = await firstBytes([chat(true), messages("translated", true)], 8, 100);
    await gateway.stop();
    const cpu = (name: string): number => rows.find((row) => row.name === name)!.cpuUs;
    const wholeCost = cpu("messages translated") - cpu("messages native");
    const eventCost = (cpu("messages translated, streamed") - cpu("messages native, streamed")) / CHAT_EVENTS_PER_STREAM;
    const ttfbChat = median(ttfb.get("chat, streamed")!);
    const ttfbTranslated = median(ttfb.get("messages translated, streamed")!);
    return [
      "### Messages API (bench/messages.ts)",
      "",
      `| call | req/s at c=${options.concurrency ?? 32} | gateway CPU µs per request |`,
      "|---|---:|---:|",
      ...rows.map((row) => `| ${row.name} | ${Math.round(row.rps)} | ${Math.round(row.cpuUs)} |`),
      "",
      `- Translation over native, whole: ${wholeCost.toFixed(1)} µs CPU per request (target ≤ 10: ${wholeCost <= 10 ? "met" : "NOT met"}).`,
      `- Translation over native, streamed: ${eventCost.toFixed(2)} µs CPU per upstream event (${CHAT_EVENTS_PER_STREAM} per answer; target ≤ 2: ${eventCost <= 2 ? "met" : "NOT met"}).`,
      `- Time to first byte, p50 of ${ttfb.get("chat, streamed")!.length} sequential streams each: chat ${ttfbChat.toFixed(3)} ms, translated Messages ${ttfbTranslated.toFixed(3)} ms (difference ${(ttfbTranslated - ttfbChat).toFixed(3)} ms; target ≤ 0.1: ${ttfbTranslated - ttfbChat <= 0.1 ? "met" : "NOT met"}).`,
      "- CPU per request comes from /proc at 10 ms ticks over whole runs; on a shared machine the rates move with other work, the CPU figures far less.",
    ].join("\n");
  } finally {
    for (const child of children) child.kill();
  }
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
