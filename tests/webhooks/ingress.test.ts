// Accepted requests become durable JobCalls: the 202 body, the producer's JobCall metadata, real
// senders' payloads stored byte for byte, redelivery folding, group commit, and 503 (never 4xx,
// never a crash) when the outbox cannot be written.
import { afterAll, describe, expect, test } from "bun:test";
import { signBody } from "../../src/webhooks/auth";
import { WebhookGateway } from "../../src/webhooks/gateway";
import type { JobCall } from "../../src/webhooks/producer";
import { buildTestGateway } from "./support";

// Alertmanager's webhook_config payload (version 4), formatted as Alertmanager sends it.
const ALERTMANAGER_V4 = `{"receiver":"modelgate","status":"firing","alerts":[{"status":"firing","labels":{"alertname":"HighLatency","instance":"api-1:9100","job":"node","severity":"page"},"annotations":{"description":"p99 latency is 2.3s on api-1","summary":"High request latency"},"startsAt":"2026-06-16T09:12:41.123Z","endsAt":"0001-01-01T00:00:00Z","generatorURL":"http://prometheus:9090/graph?g0.expr=histogram_quantile%280.99%2C+rate%28http_request_duration_seconds_bucket%5B5m%5D%29%29+%3E+1\\u0026g0.tab=1","fingerprint":"c0ffee0123456789"}],"groupLabels":{"alertname":"HighLatency"},"commonLabels":{"alertname":"HighLatency","instance":"api-1:9100","job":"node","severity":"page"},"commonAnnotations":{"description":"p99 latency is 2.3s on api-1","summary":"High request latency"},"externalURL":"http://alertmanager:9093","version":"4","groupKey":"{}/{severity=\\"page\\"}:{alertname=\\"HighLatency\\"}","truncatedAlerts":0}\n`;

// Grafana unified alerting webhook contact point payload (pretty-printed, non-ASCII, as sent).
const GRAFANA = `{
  "receiver": "modelgate",
  "status": "firing",
  "orgId": 1,
  "alerts": [
    {
      "status": "firing",
      "labels": { "alertname": "Température élevée", "grafana_folder": "Salle serveur" },
      "annotations": { "summary": "Température > 30 °C" },
      "startsAt": "2026-06-16T10:00:00Z",
      "endsAt": "0001-01-01T00:00:00Z",
      "generatorURL": "http://grafana:3000/alerting/grafana/abc/view",
      "fingerprint": "57c6d9296de2ad39",
      "silenceURL": "http://grafana:3000/alerting/silence/new?alertmanager=grafana",
      "dashboardURL": "",
      "panelURL": "",
      "values": { "B": 31.5, "C": 1 },
      "valueString": "[ var='B' labels={} value=31.5 ]"
    }
  ],
  "groupLabels": { "alertname": "Température élevée" },
  "commonLabels": { "alertname": "Température élevée" },
  "commonAnnotations": {},
  "externalURL": "http://grafana:3000/",
  "version": "1",
  "groupKey": "{}:{alertname=\\"Température élevée\\"}",
  "truncatedAlerts": 0,
  "title": "[FIRING:1] Température élevée",
  "state": "alerting",
  "message": "**Firing**\\n\\nValue: B=31.5"
}`;

const t = buildTestGateway(
  {
    endpoints: [
      { path: "/hooks/alertmanager", job_id: 11, auth: "bearer", secret: "am-token", name: "Alertmanager" },
      { path: "/hooks/grafana", job_id: 12, auth: "hmac-sha256", secret: "gf-key" },
      { path: "/hooks/github", job_id: 13, dedupe_header: "X-GitHub-Delivery" },
      { path: "/hooks/plain", job_id: 14 },
    ],
    dedupe_window_s: 3600,
  },
  { serviceId: 42 },
);
afterAll(() => t.close());

async function accepted(response: Response): Promise<{ status: string; job_id: number; call_id: number }> {
  expect(response.status).toBe(202);
  return (await response.json()) as { status: string; job_id: number; call_id: number };
}

function storedBody(callId: number): Buffer {
  const row = t.outbox.sqlite.query<{ body: Uint8Array }, [number]>("SELECT body FROM webhook_jobs WHERE call_id = ?").get(callId);
  return Buffer.from(row!.body);
}

async function nextCall(jobId: number): Promise<JobCall> {
  const producer = t.gateway.producer({ jobIds: [jobId], pollMs: 10 });
  const call = await producer.next();
  producer.close();
  return call!;
}

describe("JobCalls", () => {
  test("an accepted request is a JobCall with the body and the metadata", async () => {
    const reply = await accepted(
      await t.post("/hooks/alertmanager", ALERTMANAGER_V4, { authorization: "Bearer am-token", "content-type": "application/json" }),
    );
    expect(reply.status).toBe("accepted");
    expect(reply.job_id).toBe(11);
    const call = await nextCall(11);
    expect(call.callId).toBe(reply.call_id);
    expect(call.jobId).toBe(11);
    expect(call.attempt).toBe(1);
    expect(call.metadata).toEqual({
      "X-GATEWAY-SERVICE-ID": "42",
      "X-GATEWAY-CALL-ID": String(reply.call_id),
      "X-WEBHOOK-PATH": "/hooks/alertmanager",
      "X-WEBHOOK-NAME": "Alertmanager",
      "X-WEBHOOK-ORIGIN": "webhook",
    });
    expect(Buffer.from(call.body).equals(Buffer.from(ALERTMANAGER_V4))).toBe(true);
    expect(call.contentType).toBe("application/json");
    expect(await call.ack()).toBe(true);
  });

  test("no X-WEBHOOK-NAME when the endpoint is unnamed", async () => {
    const reply = await accepted(await t.post("/hooks/plain", "ping"));
    const call = await nextCall(14);
    expect(call.callId).toBe(reply.call_id);
    expect(Object.keys(call.metadata)).not.toContain("X-WEBHOOK-NAME");
    expect(call.metadata["X-WEBHOOK-PATH"]).toBe("/hooks/plain");
    await call.ack();
  });

  test("Alertmanager v4 and Grafana payloads are stored byte for byte", async () => {
    const am = await accepted(await t.post("/hooks/alertmanager", ALERTMANAGER_V4, { authorization: "Bearer am-token" }));
    expect(storedBody(am.call_id).equals(Buffer.from(ALERTMANAGER_V4))).toBe(true);
    const grafanaBytes = new TextEncoder().encode(GRAFANA);
    const gf = await accepted(await t.post("/hooks/grafana", grafanaBytes, { "X-Signature-256": `sha256=${signBody("gf-key", grafanaBytes)}` }));
    expect(storedBody(gf.call_id).equals(Buffer.from(grafanaBytes))).toBe(true);
    // Not even a byte that is invalid UTF-8 is touched.
    const binary = new Uint8Array([0xff, 0x00, 0xfe, 0x0a, 0x80]);
    const bin = await accepted(await t.post("/hooks/plain", binary));
    expect(storedBody(bin.call_id).equals(Buffer.from(binary))).toBe(true);
  });

  test("call_ids increase", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 5; i++) ids.push((await accepted(await t.post("/hooks/plain", `n${i}`))).call_id);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
    expect(new Set(ids).size).toBe(5);
  });
});

describe("redelivery folding (dedupe_header)", () => {
  test("the same delivery id inside the window answers with the original call_id and adds no row", async () => {
    const first = await accepted(await t.post("/hooks/github", "a", { "X-GitHub-Delivery": "d-1" }));
    const again = await accepted(await t.post("/hooks/github", "a", { "X-GitHub-Delivery": "d-1" }));
    expect(again.call_id).toBe(first.call_id);
    const other = await accepted(await t.post("/hooks/github", "b", { "X-GitHub-Delivery": "d-2" }));
    expect(other.call_id).toBeGreaterThan(first.call_id);
    const rows = t.outbox.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_jobs WHERE job_id = 13").get()!.n;
    expect(rows).toBe(2);
  });

  test("concurrent redeliveries in one commit still fold", async () => {
    const replies = await Promise.all([1, 2, 3].map(() => t.post("/hooks/github", "c", { "X-GitHub-Delivery": "d-3" }).then(accepted)));
    expect(new Set(replies.map((r) => r.call_id)).size).toBe(1);
  });

  test("after the window the same id is a new call", async () => {
    const first = await accepted(await t.post("/hooks/github", "e", { "X-GitHub-Delivery": "d-4" }));
    t.clock.advance(3_600_001);
    const later = await accepted(await t.post("/hooks/github", "e", { "X-GitHub-Delivery": "d-4" }));
    expect(later.call_id).toBeGreaterThan(first.call_id);
  });
});

describe("group commit", () => {
  test("concurrent requests share commits, and every one is durable before its 202", async () => {
    const commitsBefore = t.outbox.counters.commits;
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => t.post("/hooks/plain", `burst-${i}`).then(accepted)));
    expect(t.outbox.counters.commits - commitsBefore).toBeLessThan(50);
    // A separate connection (another process would see the same) finds every acknowledged row.
    const { Database } = await import("bun:sqlite");
    const reader = new Database(`${t.dir}/modelgate.db`, { readonly: true });
    for (const reply of replies) {
      const row = reader.query<{ body: Uint8Array }, [number]>("SELECT body FROM webhook_jobs WHERE call_id = ?").get(reply.call_id);
      expect(Buffer.from(row!.body).toString()).toMatch(/^burst-\d+$/);
    }
    reader.close();
  });
});

describe("an unwritable outbox is 503 with Retry-After", () => {
  test("full database", async () => {
    const count = () => t.outbox.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM webhook_jobs").get()!.n;
    const before = count();
    const pages = t.outbox.sqlite.query<{ page_count: number }, []>("PRAGMA page_count").get()!.page_count;
    t.outbox.sqlite.run(`PRAGMA max_page_count = ${pages}`);
    const big = "z".repeat(200_000);
    const response = await t.post("/hooks/plain", big);
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    expect(await response.json()).toEqual({ error: "unavailable" });
    expect(count()).toBe(before);
    t.outbox.sqlite.run("PRAGMA max_page_count = 1073741823");
    await accepted(await t.post("/hooks/plain", big));
    expect(count()).toBe(before + 1);
  });

  test("read-only database", async () => {
    t.outbox.sqlite.run("PRAGMA query_only = ON");
    const response = await t.post("/hooks/plain", "while read-only");
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBe("5");
    // The health check still answers and the process is fine.
    expect(await (await t.request("/webhooks/health")).text()).toBe("ok");
    t.outbox.sqlite.run("PRAGMA query_only = OFF");
    await accepted(await t.post("/hooks/plain", "after recovery"));
  });

  test("its log line names the request id its answer carries (regression: the id was made after the answer)", async () => {
    const lines: Array<{ msg: string; fields?: Record<string, unknown> }> = [];
    const logged = new WebhookGateway({
      config: t.config.webhooks,
      outbox: t.outbox,
      serviceId: 42,
      log: (_level, msg, fields) => void lines.push({ msg, fields }),
    });
    t.outbox.sqlite.run("PRAGMA query_only = ON");
    try {
      const response = await logged.fetch(new Request("http://localhost/hooks/plain", { method: "POST", body: "while read-only" }));
      expect(response.status).toBe(503);
      const id = response.headers.get("x-request-id");
      expect(id).toBeTruthy();
      expect(lines).toHaveLength(1);
      expect(lines[0].msg).toContain("answering 503");
      expect(lines[0].fields?.request_id).toBe(id);
    } finally {
      t.outbox.sqlite.run("PRAGMA query_only = OFF");
    }
  });
});
