/**
 * Alert triage benchmark (part of `make bench`; also alone: `bun bench/triage.ts`): 1,000 distinct
 * Alertmanager groups posted to the binary's webhook ingress, triaged with an instant mock model
 * as a user (`as_user`), and delivered to a local Slack receiver. Measures alerts per second end
 * to end (first post to last message received) and the gateway's CPU per alert (utime + stime
 * from /proc), next to the CPU of the same chat call made over HTTP with an API key, 1,000 times;
 * then the model call alone, in process against over the app with a key (./triage-call.ts).
 */
import { readFileSync } from "node:fs";
import { createUserKey, freePort, startGateway } from "../tests/support/binary";
import { startMockUpstream } from "../tests/support/mock-upstream";
import { startReceivers } from "../tests/webhooks/triage-support";
import { measureModelCall } from "./triage-call";

const ALERTS = Number(process.env.BENCH_TRIAGE_ALERTS ?? 1000);
const SENDERS = 32;
const TOKEN = "bench-triage-token";

/** CPU seconds the process has used (Linux /proc; NaN elsewhere). */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return Number.NaN;
  }
}

/** Outbox transactions committed since the gateway started (/api/status). */
async function commits(url: string): Promise<number> {
  const status = (await (await fetch(`${url}/api/status`)).json()) as { webhooks?: { commits_since_start?: number } };
  return status.webhooks?.commits_since_start ?? Number.NaN;
}

function group(i: number): string {
  const alert = {
    status: "firing",
    labels: { alertname: `Bench${i}`, severity: "warning", instance: "api-1" },
    annotations: { summary: "latency" },
    startsAt: "2026-11-28T06:00:00Z",
    endsAt: "0001-01-01T00:00:00Z",
    fingerprint: `f${i}`,
  };
  return JSON.stringify({
    version: "4",
    groupKey: `{}:{alertname="Bench${i}"}`,
    status: "firing",
    receiver: "modelgate",
    groupLabels: { alertname: `Bench${i}` },
    commonLabels: alert.labels,
    commonAnnotations: alert.annotations,
    externalURL: "http://am",
    alerts: [alert],
  });
}

async function inParallel(count: number, run: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: SENDERS }, async () => {
      while (next < count) await run(next++);
    }),
  );
}

export async function runTriageBench(): Promise<string> {
  const mock = startMockUpstream({ words: ["ok"] });
  const receivers = startReceivers();
  const hooksPort = freePort();
  const gateway = await startGateway(`[webhooks]
enabled = true
bind_address = "127.0.0.1:${hooksPort}"
[[webhooks.endpoints]]
path = "/hooks/am"
job_id = 1
auth = "bearer"
secret = "${TOKEN}"
[limits]
session = { per_minute = 1000000 }
api_key = { per_minute = 1000000 }
[[upstreams]]
name = "mock"
base_url = "${mock.url}"
[[models]]
id = "triage-model"
targets = [{ upstream = "mock", model = "mock-small" }]
free = true
[[jobs]]
job_id = 1
concurrency = 8
triage = { model = "triage-model", as_user = "bench@example.com", storm_per_minute = 1000000 }
notify = [{ kind = "slack", url = "${receivers.url}/slack/T/B/x" }]
`);
  try {
    const { key } = await createUserKey(gateway, { email: "bench@example.com" });
    const pid = gateway.proc.pid;
    const hooks = `http://127.0.0.1:${hooksPort}/hooks/am`;
    const commitsBefore = await commits(gateway.url);
    const cpuBefore = cpuSeconds(pid);
    const started = performance.now();
    await inParallel(ALERTS, async (i) => {
      const response = await fetch(hooks, {
        method: "POST",
        body: group(i),
        headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      });
      if (response.status !== 202) throw new Error(`ingress answered ${response.status}`);
    });
    while (receivers.of("slack").length < ALERTS) {
      if (performance.now() - started > 300_000) throw new Error(`only ${receivers.of("slack").length} of ${ALERTS} delivered in 300 s`);
      await Bun.sleep(5);
    }
    const seconds = (performance.now() - started) / 1000;
    const triageCpu = cpuSeconds(pid) - cpuBefore;
    const commitsPerAlert = ((await commits(gateway.url)) - commitsBefore) / ALERTS;
    const body = JSON.stringify({ model: "triage-model", messages: [{ role: "user", content: "x".repeat(600) }], max_tokens: 400 });
    const httpBefore = cpuSeconds(pid);
    await inParallel(ALERTS, async () => {
      const response = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        body,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      });
      if (!response.ok) throw new Error(`chat answered ${response.status}`);
      await response.text();
    });
    const httpCpu = cpuSeconds(pid) - httpBefore;
    const perAlert = (triageCpu / ALERTS) * 1e6;
    const perHttp = (httpCpu / ALERTS) * 1e6;
    const call = await measureModelCall();
    return `### Alert triage (bench/triage.ts)

${ALERTS} distinct Alertmanager groups, ${SENDERS} senders, instant mock model, one Slack receiver, job concurrency 8.

| measure | value |
|---|---|
| alerts per second, end to end (post → message received) | ${(ALERTS / seconds).toFixed(0)} |
| gateway CPU per alert (ingress, outbox, model call, delivery) | ${perAlert.toFixed(0)} µs |
| outbox transactions committed per alert (each one fsync; concurrent writes share one) | ${commitsPerAlert.toFixed(2)} |
| gateway CPU per chat call over HTTP with an API key | ${perHttp.toFixed(0)} µs |
| the model call alone, in process (createModelCaller, as_user) | ${call.inProcessUs.toFixed(0)} µs |
| the same call through the app with the user's API key (app.handle, no socket) | ${call.withKeyUs.toFixed(0)} µs |
`;
  } finally {
    await gateway.stop("SIGKILL");
    receivers.stop();
    mock.stop();
  }
}

if (import.meta.main) console.log(await runTriageBench());
