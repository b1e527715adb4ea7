/**
 * Webhook ingress benchmark (part of `make bench`; also runnable alone: `bun bench/webhooks.ts`).
 * Measures accepted webhooks per second and p50/p99 time to 202 at a fixed concurrency, for the
 * compiled binary with durable commits (WAL, synchronous=FULL, group commit) next to the floor: a
 * bare Bun server that answers the same 202 without storing anything. The request is an
 * Alertmanager-sized JSON body signed with HMAC-SHA256, so verification is part of the cost.
 * After the run, the outbox rows are counted: every 202 must be a stored row.
 * Bounded: a 1 s warm-up and `durationS` of load per target; loopback only; children are killed.
 */
import { Database } from "bun:sqlite";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { freePort, startGateway, type RunningGateway } from "../tests/support/binary";
import { runWrk, type Scenario, type WrkResult } from "./load";
import { signBody } from "../src/webhooks/auth";
import { benchDir } from "./processes";

export interface WebhookBenchOptions {
  /** Pins a server process to the server CPUs (bench/run.ts passes its own). */
  pin?: (pid: number) => void;
  /** CPUs for wrk (taskset list), or null. */
  clientCpus?: string | null;
  durationS?: number;
  concurrency?: number;
}

const SECRET = "bench-secret";
const BODY = JSON.stringify({
  receiver: "modelgate",
  status: "firing",
  version: "4",
  groupKey: '{}:{alertname="HighLatency"}',
  truncatedAlerts: 0,
  alerts: [
    {
      status: "firing",
      labels: { alertname: "HighLatency", instance: "api-1:9100", severity: "page" },
      annotations: { summary: "High request latency" },
      startsAt: "2026-06-16T09:12:41Z",
      endsAt: "0001-01-01T00:00:00Z",
      fingerprint: "c0ffee0123456789",
    },
  ],
  externalURL: "http://alertmanager:9093",
});

const FLOOR = `Bun.serve({ hostname: "127.0.0.1", port: Number(process.argv[2]), async fetch(request) {
  await request.arrayBuffer();
  return new Response('{"status":"accepted","job_id":3,"call_id":1}', { status: 202, headers: { "content-type": "application/json" } });
} });`;

async function waitFor(url: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      if ((await fetch(url)).status > 0) return;
    } catch {}
    if (Date.now() > deadline) throw new Error(`${url} did not answer`);
    await Bun.sleep(20);
  }
}

function scenario(name: string, url: string): Scenario {
  return { name, url, body: BODY, headers: { "content-type": "application/json", "X-Hub-Signature-256": `sha256=${signBody(SECRET, BODY)}` } };
}

async function measure(s: Scenario, options: Required<WebhookBenchOptions>): Promise<WrkResult> {
  await runWrk(s, { connections: options.concurrency, durationS: 1, cpus: options.clientCpus });
  return runWrk(s, { connections: options.concurrency, durationS: options.durationS, cpus: options.clientCpus });
}

export async function runWebhookBench(input: WebhookBenchOptions = {}): Promise<string> {
  const options: Required<WebhookBenchOptions> = {
    pin: input.pin ?? (() => {}),
    clientCpus: input.clientCpus ?? null,
    durationS: input.durationS ?? 3,
    concurrency: input.concurrency ?? 32,
  };
  if (!Bun.which("wrk")) throw new Error("wrk is not installed (apt-get install -y wrk)");
  const dir = benchDir("modelgate-bench-webhooks-");
  const floorFile = join(dir, "floor.ts");
  writeFileSync(floorFile, FLOOR);
  const floorPort = freePort();
  const hooksPort = freePort();
  let floor: Subprocess | null = null;
  let gateway: RunningGateway | null = null;
  try {
    floor = Bun.spawn([process.execPath, floorFile, String(floorPort)], { stdout: "ignore", stderr: "inherit" });
    options.pin(floor.pid);
    await waitFor(`http://127.0.0.1:${floorPort}/`);
    const floorResult = await measure(scenario("floor", `http://127.0.0.1:${floorPort}/hooks/alert`), options);
    floor.kill();
    floor = null;

    gateway = await startGateway(
      `[log]\nrequests = false\n[webhooks]\nenabled = true\nbind_address = "127.0.0.1:${hooksPort}"\n` +
        `[[webhooks.endpoints]]\npath = "/hooks/alert"\njob_id = 3\nauth = "hmac-sha256"\nsecret = "${SECRET}"\n`,
      { dir, args: ["--service-id", "1"] },
    );
    options.pin(gateway.proc.pid);
    const durable = await measure(scenario("modelgate", `http://127.0.0.1:${hooksPort}/hooks/alert`), options);
    const status = (await (await fetch(`${gateway.url}/api/status`)).json()) as { webhooks: { accepted_since_start: number; commits_since_start: number } };
    await gateway.stop();
    gateway = null;
    const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
    const stored = db.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_jobs").get()!.n;
    db.close();

    const row = (name: string, r: WrkResult, note: string): string =>
      `| ${name} | ${Math.round(r.rps).toLocaleString("en-US")} | ${r.p50Ms.toFixed(2)} | ${r.p99Ms.toFixed(2)} | ${r.errors} | ${note} |`;
    const perCommit = status.webhooks.accepted_since_start / Math.max(1, status.webhooks.commits_since_start);
    return [
      "### Webhook ingress (bench/webhooks.ts)",
      "",
      `POST of a ${BODY.length}-byte Alertmanager-style body signed with HMAC-SHA256, ${options.concurrency} connections, ${options.durationS} s after a 1 s warm-up (wrk).`,
      "",
      "| Target | Accepted/s | p50 to 202 (ms) | p99 to 202 (ms) | Errors | Note |",
      "|---|---:|---:|---:|---:|---|",
      row("bare Bun server, 202 without storing (floor)", floorResult, "no verification, nothing stored"),
      row("modelgate, durable (WAL + synchronous=FULL)", durable, `${Math.round(perCommit)} requests per commit on average`),
      "",
      `Durable / floor: ${(durable.rps / floorResult.rps).toFixed(2)}x throughput. Target: >= 10,000 accepted/s, p99 <= 10 ms. ` +
        `Outbox rows after the run: ${stored.toLocaleString("en-US")} (every 202, warm-up included: ${stored >= status.webhooks.accepted_since_start ? "yes" : "NO"}).`,
      "",
    ].join("\n");
  } finally {
    floor?.kill();
    if (gateway) await gateway.stop("SIGKILL");
  }
}

if (import.meta.main) {
  console.log(await runWebhookBench());
}
