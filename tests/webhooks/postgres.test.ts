// The outbox, its admin functions and the triage store on a real PostgreSQL 15, with several
// handles on one database standing in for replicas: appends durable once they resolve, call_ids
// rising; concurrent claims that never hand one call to two claimers; a lease that runs out passes
// the call on; a delivery id stored once whichever replica gets it; triage deliveries claimed
// once; a triage job run end to end. Each test has a database of its own.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { buildConfig } from "../../src/config/load";
import { tablesOf } from "../../src/db/engine";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { listJobs, outboxStats, retryJob } from "../../src/webhooks/admin";
import type { AppendInput } from "../../src/webhooks/calls";
import { Outbox, OutboxFullError, type OutboxOptions } from "../../src/webhooks/outbox";
import { WebhookProducer } from "../../src/webhooks/producer";
import { triageJobs, type ModelCaller } from "../../src/webhooks/triage";
import { startDeliveries } from "../../src/webhooks/triage/deliveries";
import { runTriage } from "../../src/webhooks/triage/handler";
import * as alerts from "../../src/webhooks/triage/store";
import * as deliveryRows from "../../src/webhooks/triage/delivery-rows";
import { startReceivers } from "./triage-support";
import { startPostgres, type RunningPostgres } from "../support/postgres";

const LEASE = 30_000;
let pg: RunningPostgres;
const opened: OpenedStorage[] = [];
let databases = 0;

beforeAll(async () => {
  pg = await startPostgres();
});
afterEach(async () => {
  for (const storage of opened.splice(0)) await storage.close();
});
afterAll(async () => {
  await pg?.stop();
});

interface Replicas {
  outboxes: Outbox[];
  clock: { now: () => number; advance(ms: number): void };
}

/** `count` handles (replicas) on a fresh database, sharing one clock. */
async function replicas(count: number, options: Partial<OutboxOptions> = {}): Promise<Replicas> {
  const url = await pg.createDatabase(`outbox_${++databases}`);
  let t = 1_800_000_000_000;
  const clock = { now: () => t, advance: (ms: number) => void (t += ms) };
  const outboxes: Outbox[] = [];
  for (let i = 0; i < count; i++) {
    const storage = await openStorage({ dataDir: "unused", url, poolSize: 4 });
    opened.push(storage);
    outboxes.push(
      new Outbox(storage.db, {
        now: clock.now,
        random: () => 0,
        dedupeWindowMs: 60_000,
        leaseMs: LEASE,
        maxAttempts: 3,
        backoffMs: 1_000,
        backoffMaxMs: 60_000,
        ...options,
      }),
    );
  }
  return { outboxes, clock };
}

function call(body: string, extra: Partial<AppendInput> = {}): AppendInput {
  return { jobId: 1, serviceId: 7, path: "/hook", name: null, body: new TextEncoder().encode(body), contentType: "text/plain", dedupeKey: null, ...extra };
}

describe("the outbox on Postgres", () => {
  test("an append resolves once its row is committed, readable by another replica; call_ids rise in the order of the appends", async () => {
    const { outboxes } = await replicas(2);
    const [a, b] = outboxes;
    const first = await Promise.all(Array.from({ length: 50 }, (_, i) => a.append(call(`first ${i}`))));
    const second = await Promise.all(Array.from({ length: 50 }, (_, i) => a.append(call(`second ${i}`))));
    const ids = [...first, ...second].map((r) => r.callId);
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1])).toBe(true);
    expect(first.every((r) => !r.duplicate)).toBe(true);
    expect(a.counters).toMatchObject({ accepted: 100, commits: 2 });
    const { webhookJobs } = tablesOf(b.db);
    const [row] = await b.db.select({ body: webhookJobs.body, path: webhookJobs.path }).from(webhookJobs).where(eq(webhookJobs.callId, second[49].callId));
    expect(Buffer.from(row.body).toString()).toBe("second 49");
    expect(await b.append(call("from b"))).toMatchObject({ duplicate: false });
    expect((await b.append(call("later"))).callId).toBeGreaterThan(ids[99]);
  });

  test("an append withdrawn before its batch is written stores nothing", async () => {
    const { outboxes } = await replicas(1);
    const [a] = outboxes;
    await expect(a.append(call("gone"), { withdrawn: () => true })).rejects.toThrow("withdrawn");
    expect(await listJobs(a.db)).toEqual([]);
  });

  test("200 calls claimed by 4 replicas at once: each call is handed out exactly once", async () => {
    const { outboxes } = await replicas(4);
    await Promise.all(Array.from({ length: 200 }, (_, i) => outboxes[i % 4].append(call(`c${i}`))));
    const claimedBy = new Map<number, number>();
    let twice = 0;
    const drain = async (outbox: Outbox, replica: number): Promise<void> => {
      for (;;) {
        const rows = await outbox.claim({ limit: 1 + (replica % 3) * 3 });
        if (rows.length === 0) return;
        for (const row of rows) {
          if (claimedBy.has(row.callId)) twice++;
          claimedBy.set(row.callId, replica);
          expect(row.attempt).toBe(1);
        }
      }
    };
    await Promise.all(outboxes.flatMap((outbox, replica) => [drain(outbox, replica), drain(outbox, replica)]));
    expect(twice).toBe(0);
    expect(claimedBy.size).toBe(200);
    expect(new Set(claimedBy.values()).size).toBeGreaterThan(1);
    expect(await outboxStats(outboxes[0].db, Date.now())).toMatchObject({ pending: 0, leased: 200, outbox_depth: 200 });
  });

  test("a lease that runs out hands the call to another replica, and the first one's ack is refused", async () => {
    const { outboxes, clock } = await replicas(2);
    const [a, b] = outboxes;
    const { callId } = await a.append(call("work"));
    const [first] = await a.claim();
    expect([first.callId, first.attempt]).toEqual([callId, 1]);
    clock.advance(LEASE - 1);
    expect(await b.claim()).toEqual([]);
    expect(await a.extend(callId, 1)).toBe(clock.now() + LEASE);
    clock.advance(LEASE);
    const [again] = await b.claim();
    expect([again.callId, again.attempt]).toEqual([callId, 2]);
    expect(await a.ack(callId, 1)).toBe(false);
    expect(await a.fail(callId, 1, "late")).toBeNull();
    expect(await b.ack(callId, 2)).toBe(true);
    expect((await listJobs(a.db)).map((j) => [j.callId, j.state, j.attempts])).toEqual([[callId, "done", 2]]);
  });

  test("failures back off, the attempt limit makes a call dead, jobs retry revives it, and an abandoned last lease dies on the sweep", async () => {
    const { outboxes, clock } = await replicas(2);
    const [a, b] = outboxes;
    const { callId } = await a.append(call("flaky"));
    const states: Array<string | null> = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      clock.advance(60_000);
      const [claimed] = await (attempt % 2 ? a : b).claim();
      expect(claimed.attempt).toBe(attempt);
      states.push(await (attempt % 2 ? b : a).fail(callId, attempt, `boom ${attempt}`));
    }
    expect(states).toEqual(["pending", "pending", "dead"]);
    expect((await listJobs(a.db, { state: "dead" }))[0].lastError).toBe("boom 3");
    expect(await retryJob(b.db, callId, clock.now())).toEqual({ ok: true, previous: "dead" });
    expect(await retryJob(b.db, callId, clock.now())).toEqual({ ok: false, reason: "pending" });
    for (let attempt = 4; attempt <= 6; attempt++) {
      const [claimed] = await a.claim();
      expect(claimed.attempt).toBe(attempt);
      clock.advance(LEASE);
    }
    expect(await b.killExpiredLeases()).toBe(1);
    expect((await listJobs(a.db, { state: "dead" }))[0].lastError).toBe("lease expired on attempt 3 of 3");
    expect(await a.claim()).toEqual([]);
  });

  test("a release gives its attempt back to the budget; done calls are pruned", async () => {
    const { outboxes, clock } = await replicas(1);
    const [a] = outboxes;
    const { callId } = await a.append(call("again"));
    const [first] = await a.claim();
    expect(await a.release(callId, first.attempt)).toBe(true);
    const [second] = await a.claim();
    expect(second.attempt).toBe(2);
    expect(await a.ack(callId, 2)).toBe(true);
    expect(await a.prune(3_600_000)).toBe(0);
    clock.advance(3_600_001);
    expect(await a.prune(3_600_000)).toBe(1);
    expect(await listJobs(a.db)).toEqual([]);
  });

  test("a delivery id sent to two replicas at once is stored once; both answer its call_id", async () => {
    const { outboxes, clock } = await replicas(2);
    const [a, b] = outboxes;
    const key = "/hook\u0000delivery-1";
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).append(call(`copy ${i}`, { dedupeKey: key }))));
    expect(new Set(results.map((r) => r.callId)).size).toBe(1);
    expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
    expect(a.counters.duplicates + b.counters.duplicates).toBe(19);
    expect(await listJobs(a.db)).toHaveLength(1);
    // Past the window the id names a new call.
    clock.advance(60_000);
    const later = await b.append(call("new", { dedupeKey: key }));
    expect(later.duplicate).toBe(false);
    expect(later.callId).toBeGreaterThan(results[0].callId);
    expect(await a.append(call("copy", { dedupeKey: key }))).toEqual({ callId: later.callId, duplicate: true });
  });

  test("max_pending_bytes counts every replica's undelivered calls; a redelivery is still taken", async () => {
    const { outboxes, clock } = await replicas(2, { maxPendingBytes: 2_500 });
    const [a, b] = outboxes;
    const kilobyte = "x".repeat(1_000);
    await a.append(call(kilobyte, { dedupeKey: "k1" }));
    await a.append(call(kilobyte));
    clock.advance(1_000); // b counted the table when it started, empty then; it counts again a second later
    await expect(b.append(call(kilobyte))).rejects.toBeInstanceOf(OutboxFullError);
    expect(await b.append(call(kilobyte, { dedupeKey: "k1" }))).toMatchObject({ duplicate: true });
  });
});

describe("the triage store on Postgres", () => {
  const alert = (fields: Partial<alerts.NewAlert> = {}): alerts.NewAlert => ({
    call_id: null,
    job_id: 1,
    path: "/am",
    kind: "alertmanager",
    status: "firing",
    group_key: "g",
    dedupe_key: "d",
    title: "DiskFull",
    severity: "critical",
    details: "",
    alert_count: 1,
    state: "triaging",
    refers_to: null,
    digest_id: null,
    created_at: 1_000,
    due_at: null,
    ...fields,
  });

  test("alerts, a group's last, the storm count and a digest's members", async () => {
    const { outboxes } = await replicas(1);
    const { db } = outboxes[0];
    const firing = await alerts.insertAlert(db, alert({ call_id: 11 }));
    expect(await alerts.alertByCall(db, 11)).toEqual(firing);
    await alerts.setSummary(db, firing.id, { summary: "Disk is filling." });
    expect(await alerts.alertById(db, firing.id)).toMatchObject({ state: "summarised", summary: "Disk is filling.", created_at: 1_000 });
    await alerts.insertAlert(db, alert({ call_id: 12, state: "duplicate" }));
    const resolved = await alerts.insertAlert(db, alert({ call_id: 13, status: "resolved", refers_to: firing.id, created_at: 2_000 }));
    expect((await alerts.lastOfGroup(db, 1, "g"))?.id).toBe(resolved.id);
    expect((await alerts.lastOfGroup(db, 1, "g", "firing"))?.id).toBe(firing.id);
    expect(await alerts.countSince(db, 1, "/am", 0, 10)).toBe(2);
    expect(await alerts.countSince(db, 1, "/am", 0, 1)).toBe(1);
    const digest = await alerts.insertAlert(db, alert({ state: "digest", kind: "digest", due_at: 9_000 }));
    expect((await alerts.openDigest(db, 1, "/am", 5_000))?.id).toBe(digest.id);
    expect(await alerts.openDigest(db, 1, "/am", 9_000)).toBeNull();
    for (const title of ["A", "B", "A"]) await alerts.insertAlert(db, alert({ state: "held", digest_id: digest.id, title }));
    expect(await alerts.digestMembers(db, digest.id)).toEqual({
      count: 3,
      titles: [
        { title: "A", n: 2 },
        { title: "B", n: 1 },
      ],
    });
    const recent = await alerts.recentAlerts(db, 10);
    expect(recent.alerts.map((a) => a.id)).toEqual([digest.id, resolved.id, resolved.id - 1, firing.id]);
    expect(recent.held.get(digest.id)).toBe(3);
  });

  test("due deliveries claimed from two replicas at once go to one each; sent, failed, dead and retried", async () => {
    const { outboxes, clock } = await replicas(2);
    const [a, b] = outboxes;
    const ids: number[] = [];
    for (let i = 0; i < 20; i++) {
      const row = await alerts.insertAlert(a.db, alert({ call_id: 100 + i }));
      await deliveryRows.addDeliveries(a.db, row.id, ["slack", "ntfy"], 500);
      await deliveryRows.addDeliveries(a.db, row.id, ["slack", "ntfy"], 500); // adds nothing
      ids.push(row.id);
    }
    const claims = await Promise.all([a, b, a, b].map((o) => deliveryRows.claimDeliveries(o.db, 1_000, 15, 60_000)));
    const keys = claims.flat().map((d) => `${d.alert_id}/${d.target}`);
    expect(keys).toHaveLength(40);
    expect(new Set(keys).size).toBe(40);
    expect(await deliveryRows.claimDeliveries(b.db, 1_000, 50, 60_000)).toEqual([]);
    expect(await deliveryRows.nextDue(a.db)).toBe(61_000);
    const [first, second] = await deliveryRows.deliveriesOf(a.db, [ids[0]]);
    await deliveryRows.markSent(a.db, first, 2_000, "$event");
    await deliveryRows.markFailed(a.db, second, "HTTP 404", null);
    expect((await deliveryRows.deliveriesOf(b.db, [ids[0]])).map((d) => [d.state, d.attempts, d.remote_id])).toEqual([
      ["sent", 1, "$event"],
      ["dead", 1, null],
    ]);
    expect(await deliveryRows.retryDeliveries(b.db, ids[0], clock.now())).toBe(1);
    expect(await deliveryRows.retryDeliveries(b.db, ids[0], clock.now())).toBe(0);
    // A lease that ran out: the claim passes to whoever looks next.
    expect((await deliveryRows.claimDeliveries(b.db, 61_000, 50, 60_000)).length).toBe(38);
  });
});

describe("triage jobs on Postgres", () => {
  test("a call triaged on one replica is recorded and acked in one transaction; its delivery is sent once though both replicas send", async () => {
    const receivers = startReceivers();
    const { config } = buildConfig(
      {
        webhooks: { enabled: true, endpoints: [{ path: "/hooks/grafana", job_id: 1 }] },
        jobs: [{ job_id: 1, triage: { model: "m" }, notify: [{ kind: "webhook", url: `${receivers.url}/hook/alerts` }] }],
      },
      { env: {} },
    );
    const jobs = triageJobs(config);
    const { outboxes } = await replicas(2, { now: Date.now });
    const [a, b] = outboxes;
    const body = readFileSync(join(import.meta.dir, "fixtures", "grafana-firing.json"));
    const { callId } = await a.append(call("", { path: "/hooks/grafana", body, contentType: "application/json" }));
    const producer = new WebhookProducer(b, { jobIds: [1], pollMs: 20 });
    const jobCall = (await producer.next())!;
    producer.close();
    const asked: string[] = [];
    const callModel: ModelCaller = async (request) => {
      asked.push(request.prompt);
      return { ok: true, text: "CPU is high on web-2." };
    };
    await runTriage(jobs[0], jobCall, { outbox: b, callModel, delivered: () => {} });
    expect(asked).toHaveLength(1);
    expect(await alerts.alertByCall(a.db, callId)).toMatchObject({ state: "summarised", summary: "CPU is high on web-2." });
    expect((await listJobs(a.db)).map((j) => [j.callId, j.state])).toEqual([[callId, "done"]]);
    const log = (): void => {};
    const senders = [a, b].map((outbox) => startDeliveries({ outbox, jobs, backoffMs: 100, backoffMaxMs: 1_000, redact: (text) => text, log, pollMs: 20 }));
    try {
      const alert = (await alerts.alertByCall(a.db, callId))!;
      for (let i = 0; i < 500 && (await deliveryRows.deliveriesOf(a.db, [alert.id]))[0]?.state !== "sent"; i++) await Bun.sleep(20);
      expect((await deliveryRows.deliveriesOf(a.db, [alert.id])).map((d) => [d.state, d.attempts])).toEqual([["sent", 1]]);
      expect(receivers.of("webhook")).toHaveLength(1);
      expect(receivers.of("webhook")[0].text).toContain("CPU is high on web-2.");
    } finally {
      await Promise.all(senders.map((sender) => sender.stop(1_000)));
      receivers.stop();
    }
  });
});
