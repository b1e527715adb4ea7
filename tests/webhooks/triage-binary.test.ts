// Alert triage against the compiled binary: a real Alertmanager sends to modelgate's webhook
// ingress, the mock model summarises, and local receivers check each notifier's request format.
// Also: kill -9 between the model's answer and the notification, a receiver down for a while, a
// storm of 500 alert groups, a model that is down, and a notifier URL that answers 404.
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { ALERTMANAGER, GOTIFY_TOKEN, MATRIX_TOKEN, startAlertmanager, startReceivers, type Alertmanager, type Receivers } from "./triage-support";

const TOKEN = "am-bearer-token-42";
const SUMMARY = ["Disk", " is", " filling", " on", " db-1."];
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

interface Setup {
  gateway: RunningGateway;
  hooks: string;
  mock: MockUpstream;
  receivers: Receivers;
  dir: string;
}

function toml(hooksPort: number, mock: MockUpstream, receivers: Receivers, options: { triage?: string; notify?: string; concurrency?: number } = {}): string {
  const r = receivers.url;
  return `[webhooks]
enabled = true
bind_address = "127.0.0.1:${hooksPort}"
lease_ms = 1000
backoff_ms = 100
backoff_max_ms = 400

[[webhooks.endpoints]]
path = "/hooks/alertmanager"
job_id = 1
auth = "bearer"
secret = "${TOKEN}"

[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "triage-model"
targets = [{ upstream = "mock", model = "mock-small" }]
free = true

[[jobs]]
job_id = 1
concurrency = ${options.concurrency ?? 2}
timeout_ms = 2000
triage = { model = "triage-model", wait_ms = 600${options.triage ?? ""} }
notify = ${options.notify ?? `[{ kind = "slack", url = "${r}/slack/T000/B000/slacksecretpath" }, { kind = "ntfy", url = "${r}/ntfy/alerts" }]`}
`;
}

async function setup(
  options: Parameters<typeof toml>[3] & { dir?: string; mock?: MockUpstream; receivers?: Receivers; hooksPort?: number } = {},
): Promise<Setup> {
  const mock = options.mock ?? startMockUpstream({ words: SUMMARY });
  const receivers = options.receivers ?? startReceivers();
  if (!options.mock) cleanups.push(() => mock.stop());
  if (!options.receivers) cleanups.push(() => receivers.stop());
  const hooksPort = options.hooksPort ?? freePort();
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "modelgate-triage-"));
  const gateway = await startGateway(toml(hooksPort, mock, receivers, options), { dir });
  cleanups.push(() => gateway.proc.exitCode === null && gateway.stop("SIGKILL"));
  return { gateway, hooks: `http://127.0.0.1:${hooksPort}`, mock, receivers, dir };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

function chatCalls(mock: MockUpstream): number {
  return mock.requests.filter((r) => r.path.endsWith("/chat/completions")).length;
}

function post(hooks: string, body: string): Promise<Response> {
  return fetch(`${hooks}/hooks/alertmanager`, { method: "POST", body, headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" } });
}

/** An Alertmanager v4 group of one alert, as Alertmanager sends it. */
function amGroup(name: string, status: "firing" | "resolved", fingerprint = name): string {
  const alert = {
    status,
    labels: { alertname: name, severity: "critical", instance: "db-1" },
    annotations: { summary: `${name} on db-1` },
    startsAt: "2026-11-28T06:00:00Z",
    endsAt: status === "resolved" ? "2026-11-28T06:14:00Z" : "0001-01-01T00:00:00Z",
    generatorURL: "http://prometheus/graph",
    fingerprint,
  };
  return JSON.stringify({
    version: "4",
    groupKey: `{}:{alertname="${name}"}`,
    truncatedAlerts: 0,
    status,
    receiver: "modelgate",
    groupLabels: { alertname: name },
    commonLabels: alert.labels,
    commonAnnotations: alert.annotations,
    externalURL: "http://alertmanager",
    alerts: [alert],
  });
}

function rows<T>(dir: string, sql: string): T[] {
  const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
  try {
    return db.query<T, []>(sql).all();
  } finally {
    db.close();
  }
}

describe.skipIf(!existsSync(ALERTMANAGER))("Alertmanager → modelgate → model → Slack and ntfy", () => {
  test("one message per alert group and status, repeats folded, resolved refers back to firing", async () => {
    const { hooks, mock, receivers } = await setup();
    const am: Alertmanager = await startAlertmanager(`${hooks}/hooks/alertmanager`, TOKEN);
    cleanups.push(() => am.stop());
    const alerts = [
      { labels: { alertname: "DiskFull", severity: "critical", instance: "db-1" }, annotations: { summary: "disk 97% full" } },
      { labels: { alertname: "HighLatency", severity: "warning", instance: "api-1" }, annotations: { summary: "p99 over 2 s" } },
    ];
    await am.post(alerts);
    await until(() => receivers.of("slack").length >= 2 && receivers.of("ntfy").length >= 2, "two firing messages");
    // Alertmanager repeats both groups every repeat_interval (2 s): wait through repeats.
    await Bun.sleep(5_000);
    expect(receivers.of("slack").length).toBe(2);
    expect(receivers.of("ntfy").length).toBe(2);
    const past = new Date(Date.now() - 1000).toISOString();
    await am.post(alerts.map((a) => ({ ...a, endsAt: past })));
    await until(() => receivers.of("slack").length >= 4 && receivers.of("ntfy").length >= 4, "two resolved messages");
    await Bun.sleep(3_000);
    const slack = receivers.of("slack").map((r) => r.text);
    expect(slack.length).toBe(4);
    expect(slack.filter((t) => t.includes("[FIRING critical] DiskFull")).length).toBe(1);
    expect(slack.filter((t) => t.includes("[FIRING warning] HighLatency")).length).toBe(1);
    expect(slack.filter((t) => t.startsWith("*[RESOLVED]") && /Resolved after \d+ min/.test(t)).length).toBe(2);
    for (const text of slack) expect(text).toContain("Disk is filling on db-1.");
    const ntfy = receivers.of("ntfy");
    expect(ntfy.length).toBe(4);
    const critical = ntfy.find((r) => r.text.includes("DiskFull") && r.text.includes("FIRING"))!;
    expect(critical.headers.priority).toBe("5");
    expect(critical.headers.tags).toBe("rotating_light");
    const warning = ntfy.find((r) => r.text.includes("HighLatency") && r.text.includes("FIRING"))!;
    expect(warning.headers.priority).toBe("4");
    for (const resolved of ntfy.filter((r) => r.text.includes("RESOLVED"))) expect(resolved.headers.tags).toBe("white_check_mark");
    // One model call per message: repeats never reached the model.
    expect(chatCalls(mock)).toBe(4);
  }, 90_000);
});

describe("durable steps", () => {
  test("kill -9 after the model answered, before the notification: sent once after restart, the model not asked again", async () => {
    const receivers = startReceivers();
    cleanups.push(() => receivers.stop());
    receivers.down.add("slack");
    const first = await setup({ receivers });
    expect((await post(first.hooks, amGroup("NodeDown", "firing"))).status).toBe(202);
    await until(() => rows<{ state: string }>(first.dir, "SELECT state FROM triage_alerts").some((r) => r.state === "summarised"), "the stored summary");
    await until(() => receivers.of("ntfy").length === 1, "ntfy's message");
    first.gateway.proc.kill("SIGKILL");
    await first.gateway.proc.exited;
    receivers.down.delete("slack");
    const second = await setup({ receivers, mock: first.mock, dir: first.dir, hooksPort: Number(new URL(first.hooks).port) });
    await until(() => receivers.of("slack").length === 1, "slack's message after the restart");
    await Bun.sleep(1_500);
    expect(receivers.of("slack").length).toBe(1);
    expect(receivers.of("ntfy").length).toBe(1);
    expect(chatCalls(second.mock)).toBe(1);
  }, 60_000);

  test("a receiver down for a while, then back: delivered once; the other target is not sent again", async () => {
    const receivers = startReceivers();
    cleanups.push(() => receivers.stop());
    receivers.down.add("slack");
    const { hooks, mock } = await setup({ receivers });
    expect((await post(hooks, amGroup("CertExpiry", "firing"))).status).toBe(202);
    await until(() => receivers.of("ntfy").length === 1, "ntfy's message");
    await Bun.sleep(1_500); // several failed attempts at Slack
    receivers.down.delete("slack");
    await until(() => receivers.of("slack").length === 1, "slack's message");
    await Bun.sleep(1_000);
    expect(receivers.of("slack").length).toBe(1);
    expect(receivers.of("ntfy").length).toBe(1);
    expect(chatCalls(mock)).toBe(1);
  }, 60_000);

  test("a storm of 500 alert groups becomes one digest, not 500 messages", async () => {
    const { hooks, receivers, dir } = await setup({ triage: ", storm_per_minute = 5, digest_window_s = 2", concurrency: 4 });
    for (let i = 0; i < 500; i += 50) {
      const batch = Array.from({ length: 50 }, (_, j) => post(hooks, amGroup(`Storm${i + j}`, "firing")));
      for (const response of await Promise.all(batch)) expect(response.status).toBe(202);
    }
    await until(() => rows<{ n: number }>(dir, "SELECT count(*) AS n FROM triage_alerts WHERE state != 'digest'")[0].n === 500, "all 500 triaged");
    await until(() => receivers.of("slack").some((r) => r.text.includes("[STORM]")), "the digest");
    await Bun.sleep(2_500);
    const slack = receivers.of("slack");
    const digests = slack.filter((r) => r.text.includes("[STORM]"));
    expect(slack.length).toBeLessThan(20);
    expect(digests.length).toBeGreaterThanOrEqual(1);
    const individual = slack.length - digests.length;
    expect(individual).toBe(5);
    const digested = digests.reduce((sum, d) => sum + Number(/\[STORM\] (\d+) alerts/.exec(d.text)![1]), 0);
    expect(digested).toBe(495);
  }, 90_000);

  test("model down: the notification goes out without a summary, saying why", async () => {
    const mock = startMockUpstream({ failWith: 503 });
    cleanups.push(() => mock.stop());
    const { hooks, receivers } = await setup({ mock });
    expect((await post(hooks, amGroup("BackupFailed", "firing"))).status).toBe(202);
    await until(() => receivers.of("slack").length === 1, "the unsummarised message");
    const text = receivers.of("slack")[0].text;
    expect(text).toContain("BackupFailed");
    expect(text).toContain("(no summary:");
    expect(text).toContain("BackupFailed on db-1");
  }, 30_000);
});

describe("every notifier's format, and bad input", () => {
  test("discord, gotify, matrix and webhook get their documented requests; a resolved alert is a Matrix reply to its firing one", async () => {
    const receivers = startReceivers();
    cleanups.push(() => receivers.stop());
    const r = receivers.url;
    const notify = `[{ kind = "discord", url = "${r}/discord/api/webhooks/1/discordsecret" }, { kind = "gotify", url = "${r}/gotify", token = "${GOTIFY_TOKEN}" }, { kind = "matrix", homeserver = "${r}", room = "!ops:example.org", token = "${MATRIX_TOKEN}" }, { kind = "webhook", url = "${r}/hook" }]`;
    const { hooks } = await setup({ receivers, notify });
    expect((await post(hooks, amGroup("Db", "firing"))).status).toBe(202);
    await until(() => receivers.received.length === 4, "four firing messages");
    expect((await post(hooks, amGroup("Db", "resolved"))).status).toBe(202);
    await until(() => receivers.received.length === 8, "four resolved messages");
    const matrix = receivers.of("matrix");
    expect(matrix[0].body.room).toBe("!ops:example.org");
    expect(matrix[1].body["m.relates_to"]).toEqual({ "m.in_reply_to": { event_id: "$event1" } });
    const gotify = receivers.of("gotify");
    expect(gotify[0].body.priority).toBe(8);
    expect(gotify[1].body.priority).toBe(2);
    expect(receivers.of("webhook")[1].body.status).toBe("resolved");
    expect(receivers.of("discord")[1].text).toContain("Resolved after");
  }, 30_000);

  test("an unparseable body is triaged as text; a notifier answering 404 is dead-lettered with its URL redacted", async () => {
    const receivers = startReceivers();
    cleanups.push(() => receivers.stop());
    const notify = `[{ kind = "slack", url = "${receivers.url}/slack/T0/B0/x" }, { kind = "webhook", url = "${receivers.url}/hook/gone/hooksecretpath" }]`;
    const { hooks, dir } = await setup({ receivers, notify });
    expect((await post(hooks, "disk full on \xff{not json")).status).toBe(202);
    await until(() => receivers.of("slack").length === 1, "the slack message");
    expect(receivers.of("slack")[0].text).toContain("disk full on");
    await until(() => rows<{ state: string }>(dir, "SELECT state FROM triage_deliveries WHERE target = 1")[0]?.state === "dead", "the dead letter");
    const [dead] = rows<{ last_error: string; attempts: number }>(dir, "SELECT last_error, attempts FROM triage_deliveries WHERE target = 1");
    expect(dead.attempts).toBe(1);
    expect(dead.last_error).toContain("HTTP 404");
    expect(dead.last_error).not.toContain("hooksecretpath");
  }, 30_000);
});
