// At-least-once delivery: leases (from the claim, not the creation), fencing of a consumer whose
// lease was taken over, the attempt limit and dead state, retry, retention; the pull API. Run on
// SQLite and on a real Postgres (a database per gateway).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { join } from "node:path";
import { tablesOf } from "../../src/db/engine";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { outboxFor } from "../../src/webhooks";
import { listJobs, outboxStats, retryJob } from "../../src/webhooks/admin";
import { OutboxFullError } from "../../src/webhooks/outbox";
import { startPostgres, type RunningPostgres } from "../support/postgres";
import { buildTestGateway, type TestGateway } from "./support";

const LEASE = 30_000;
let pg: RunningPostgres;
const storages: OpenedStorage[] = [];
let databases = 0;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  for (const storage of storages) await storage.close();
  await pg?.stop();
});

type Build = (webhooks: Record<string, unknown>) => Promise<TestGateway>;

const engines: Array<[string, Build]> = [
  ["sqlite", async (webhooks) => buildTestGateway(webhooks)],
  [
    "postgres",
    async (webhooks) => {
      const storage = await openStorage({ dataDir: "unused", url: await pg.createDatabase(`delivery_${++databases}`), poolSize: 4 });
      storages.push(storage);
      return buildTestGateway(webhooks, { db: storage.db });
    },
  ],
];

describe.each(engines)("on %s", (engine, build) => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await build({
      endpoints: [
        { path: "/a", job_id: 1 },
        { path: "/b", job_id: 2 },
        { path: "/c", job_id: 3 },
        { path: "/pull", job_id: 4 },
      ],
      lease_ms: LEASE,
      max_attempts: 3,
      backoff_ms: 1_000,
      backoff_max_ms: 60_000,
      retain_done_hours: 1,
      pull_token: "pull-secret",
    });
  });
  afterAll(() => t.close());

  async function enqueue(path: string, body: string): Promise<number> {
    const response = await t.post(path, body);
    expect(response.status).toBe(202);
    return ((await response.json()) as { call_id: number }).call_id;
  }

  async function stateOf(callId: number): Promise<{ state: string; attempts: number } | undefined> {
    const { webhookJobs } = tablesOf(t.outbox.db);
    const [row] = await t.outbox.db
      .select({ state: webhookJobs.state, attempts: webhookJobs.attempts })
      .from(webhookJobs)
      .where(eq(webhookJobs.callId, callId));
    return row;
  }

  describe("leases", () => {
    test("a consumer that dies mid-job gets its call redelivered after the lease, not before", async () => {
      const callId = await enqueue("/a", "work");
      const [first] = await t.outbox.claim({ jobIds: [1] });
      expect(first.callId).toBe(callId);
      expect(first.attempt).toBe(1);
      // The consumer dies here: no ack, no fail.
      t.clock.advance(LEASE - 1);
      expect(await t.outbox.claim({ jobIds: [1] })).toEqual([]);
      t.clock.advance(1);
      const [again] = await t.outbox.claim({ jobIds: [1] });
      expect(again.callId).toBe(callId);
      expect(again.attempt).toBe(2);
      expect(Buffer.from(again.body).toString()).toBe("work");
      // A late ack from the dead consumer's attempt is refused; the live one counts.
      expect(await t.outbox.ack(callId, 1)).toBe(false);
      expect(await t.outbox.ack(callId, 2)).toBe(true);
      expect(await stateOf(callId)).toEqual({ state: "done", attempts: 2 });
    });

    test("a long-queued call is not requeued while it runs: the lease starts at the claim", async () => {
      const callId = await enqueue("/b", "old");
      t.clock.advance(10 * 3_600_000);
      const producer = t.gateway.producer({ jobIds: [2], pollMs: 10 });
      const call = (await producer.next())!;
      producer.close();
      expect(call.callId).toBe(callId);
      t.clock.advance(LEASE / 2);
      expect(await t.outbox.claim({ jobIds: [2] })).toEqual([]);
      expect(await call.extend()).toBe(true);
      t.clock.advance(LEASE - 1);
      expect(await t.outbox.claim({ jobIds: [2] })).toEqual([]);
      expect(await call.ack()).toBe(true);
    });

    test("the attempt limit leads to dead; jobs retry revives it, with attempt numbers that go on rising", async () => {
      const callId = await enqueue("/c", "flaky");
      const states: Array<string | null> = [];
      for (let attempt = 1; attempt <= 3; attempt++) {
        t.clock.advance(60_000); // past any backoff
        const [call] = await t.outbox.claim({ jobIds: [3] });
        expect(call.attempt).toBe(attempt);
        states.push(await t.outbox.fail(callId, attempt, `boom ${attempt}`));
      }
      expect(states).toEqual(["pending", "pending", "dead"]);
      t.clock.advance(3_600_000);
      expect(await t.outbox.claim({ jobIds: [3] })).toEqual([]);
      const dead = (await listJobs(t.main.db, { state: "dead" })).find((j) => j.callId === callId)!;
      expect(dead.lastError).toBe("boom 3");
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: true, previous: "dead" });
      const [revived] = await t.outbox.claim({ jobIds: [3] });
      expect(revived.callId).toBe(callId);
      expect(revived.attempt).toBe(4);
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: false, reason: "leased" });
      expect(await retryJob(t.main.db, 999_999, t.clock.now())).toEqual({ ok: false, reason: "not_found" });
      expect(await outboxStats(t.main.db, t.clock.now())).toMatchObject({ pending: 0, leased: 1 });
      t.clock.advance(LEASE); // the lease has run out: it counts as pending and is delivered again by itself
      expect(await outboxStats(t.main.db, t.clock.now())).toMatchObject({ pending: 1, leased: 0, outbox_depth: 1 });
      const [again] = await t.outbox.claim({ jobIds: [3] });
      expect(again.attempt).toBe(5);
      expect(await t.outbox.fail(callId, again.attempt, "once more")).toBe("pending");
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: false, reason: "pending" });
      t.clock.advance(60_000);
      const [third] = await t.outbox.claim({ jobIds: [3] });
      // The budget counts from the retry: this is the third delivery since, so a failure is the last.
      expect(third.attempt).toBe(6);
      for (const stale of [1, 3, 4, 5]) expect(await t.outbox.ack(callId, stale)).toBe(false);
      expect(await t.outbox.fail(callId, third.attempt, "last")).toBe("dead");
    });

    test("after a retry the backoff starts again from backoff_ms, and a release gives its attempt back to the budget, not its number", async () => {
      const callId = await enqueue("/c", "again");
      for (let attempt = 1; attempt <= 3; attempt++) {
        t.clock.advance(60_000);
        const [call] = await t.outbox.claim({ jobIds: [3] });
        await t.outbox.fail(callId, call.attempt, "boom");
      }
      expect(await retryJob(t.main.db, callId, t.clock.now())).toMatchObject({ ok: true, previous: "dead" });
      const [fourth] = await t.outbox.claim({ jobIds: [3] });
      expect(await t.outbox.fail(callId, fourth.attempt, "boom")).toBe("pending");
      t.clock.advance(999); // backoff_ms (1 s), as after a first failure; not 8 s as the fourth
      expect(await t.outbox.claim({ jobIds: [3] })).toEqual([]);
      t.clock.advance(1);
      const [fifth] = await t.outbox.claim({ jobIds: [3] });
      expect(await t.outbox.release(callId, fifth.attempt)).toBe(true);
      const [sixth] = await t.outbox.claim({ jobIds: [3] });
      expect(sixth.attempt).toBe(6);
      expect(await t.outbox.ack(callId, fifth.attempt)).toBe(false);
      // Released, the fifth did not count: the sixth delivery is the second since the retry.
      expect(await t.outbox.fail(callId, sixth.attempt, "boom")).toBe("pending");
      t.clock.advance(60_000);
      const [seventh] = await t.outbox.claim({ jobIds: [3] });
      expect(await t.outbox.fail(callId, seventh.attempt, "boom")).toBe("dead");
    });

    test("a consumer whose lease was taken over before the call died cannot ack its delivery after jobs retry (regression: the retry restarted the attempt numbers at 1)", async () => {
      const callId = await enqueue("/c", "fenced");
      const [first] = await t.outbox.claim({ jobIds: [3] }); // A: attempt 1
      t.clock.advance(LEASE);
      const [second] = await t.outbox.claim({ jobIds: [3] }); // B takes it over: attempt 2
      expect(await t.outbox.fail(callId, second.attempt, "b failed")).toBe("pending");
      t.clock.advance(60_000);
      const [third] = await t.outbox.claim({ jobIds: [3] });
      expect(await t.outbox.fail(callId, third.attempt, "c failed")).toBe("dead");
      expect(await retryJob(t.main.db, callId, t.clock.now())).toMatchObject({ ok: true });
      const [current] = await t.outbox.claim({ jobIds: [3] });
      for (const stale of [first, second, third]) {
        expect(await t.outbox.ack(callId, stale.attempt)).toBe(false);
        expect(await t.outbox.extend(callId, stale.attempt)).toBeNull();
        expect(await t.outbox.fail(callId, stale.attempt, "stale")).toBeNull();
      }
      expect(await t.outbox.ack(callId, current.attempt)).toBe(true);
    });

    test("a call whose last lease ran out is dead without waiting for another claim, and jobs retry takes it (regression: it showed as pending, retry refused it as leased, and it died only when something claimed again)", async () => {
      const callId = await enqueue("/c", "abandoned");
      for (let attempt = 1; attempt <= 3; attempt++) {
        t.clock.advance(60_000);
        const [call] = await t.outbox.claim({ jobIds: [3] });
        expect(call.attempt).toBe(attempt);
      }
      expect(await t.outbox.killExpiredLeases()).toBe(0); // the last lease still runs
      t.clock.advance(LEASE);
      expect(await t.outbox.killExpiredLeases()).toBe(1);
      expect(await outboxStats(t.main.db, t.clock.now())).toMatchObject({ pending: 0, leased: 0 });
      expect((await listJobs(t.main.db, { state: "dead" })).find((j) => j.callId === callId)?.lastError).toBe("lease expired on attempt 3 of 3");
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: true, previous: "dead" });
      const [revived] = await t.outbox.claim({ jobIds: [3] });
      expect(revived.attempt).toBe(4);
      expect(await t.outbox.ack(callId, revived.attempt)).toBe(true);
    });

    test("an expired lease with attempts left is retried too; jobs list gives each call's size", async () => {
      const callId = await enqueue("/c", "x".repeat(5000));
      await t.outbox.claim({ jobIds: [3] });
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: false, reason: "leased" });
      t.clock.advance(LEASE);
      expect(await retryJob(t.main.db, callId, t.clock.now())).toEqual({ ok: true, previous: "leased" });
      expect((await listJobs(t.main.db, {})).find((j) => j.callId === callId)).toMatchObject({ state: "pending", attempts: 1, bytes: 5000 });
      const [again] = await t.outbox.claim({ jobIds: [3] });
      expect([again.callId, again.attempt]).toEqual([callId, 2]);
      expect(await t.outbox.ack(callId, again.attempt)).toBe(true);
    });

    test("failures back off exponentially", async () => {
      const callId = await enqueue("/c", "backoff");
      const [c1] = await t.outbox.claim({ jobIds: [3] });
      await t.outbox.fail(callId, c1.attempt, "x");
      t.clock.advance(999);
      expect(await t.outbox.claim({ jobIds: [3] })).toEqual([]);
      t.clock.advance(1);
      const [c2] = await t.outbox.claim({ jobIds: [3] });
      await t.outbox.fail(callId, c2.attempt, "x");
      t.clock.advance(1_999);
      expect(await t.outbox.claim({ jobIds: [3] })).toEqual([]);
      t.clock.advance(1);
      const [c3] = await t.outbox.claim({ jobIds: [3] });
      expect(c3.attempt).toBe(3);
      await t.outbox.ack(callId, 3);
    });

    test("a call abandoned on its last attempt becomes dead when the lease runs out", async () => {
      const callId = await enqueue("/c", "abandoned");
      for (let attempt = 1; attempt <= 3; attempt++) {
        const [call] = await t.outbox.claim({ jobIds: [3] });
        expect(call.attempt).toBe(attempt);
        t.clock.advance(LEASE);
      }
      expect(await t.outbox.claim({ jobIds: [3] })).toEqual([]);
      expect((await stateOf(callId))?.state).toBe("dead");
    });

    test("calls that die on their expired last lease do not use up a claim's limit (regression: the claim came back empty)", async () => {
      const abandoned = [await enqueue("/b", "x1"), await enqueue("/b", "x2")];
      for (let attempt = 1; attempt <= 3; attempt++) {
        expect((await t.outbox.claim({ jobIds: [2], limit: 2 })).map((c) => c.callId)).toEqual(abandoned);
        t.clock.advance(LEASE);
      }
      const due = await enqueue("/b", "due");
      expect((await t.outbox.claim({ jobIds: [2], limit: 1 })).map((c) => c.callId)).toEqual([due]);
      expect(await Promise.all(abandoned.map(async (id) => (await stateOf(id))?.state))).toEqual(["dead", "dead"]);
    });

    test("done calls are pruned after retain_done_hours; call_ids keep increasing", async () => {
      const callId = await enqueue("/a", "prune me");
      const [call] = await t.outbox.claim({ jobIds: [1] });
      await t.outbox.ack(call.callId, call.attempt);
      await t.outbox.prune(3_600_000); // older done calls from the tests above go
      expect(await stateOf(callId)).toBeDefined();
      t.clock.advance(3_600_001);
      expect(await t.outbox.prune(3_600_000)).toBeGreaterThanOrEqual(1);
      expect(await stateOf(callId)).toBeUndefined();
      expect(await enqueue("/a", "next")).toBeGreaterThan(callId);
    });
  });

  describe("pull API", () => {
    const pull = (path: string, body: unknown, token = "pull-secret") =>
      t.request(`/webhooks/jobs/${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });

    test("needs the pull token", async () => {
      expect((await pull("claim", {}, "wrong")).status).toBe(401);
      expect((await t.request("/webhooks/jobs/claim", { method: "POST" })).status).toBe(401);
    });

    test("claim, extend, ack, and a lost lease is 409", async () => {
      const payload = new Uint8Array([0, 1, 2, 250, 255]);
      expect((await t.post("/pull", payload)).status).toBe(202);
      const claimed = (await (await pull("claim", { max: 10, job_ids: [4] })).json()) as { jobs: any[] };
      expect(claimed.jobs).toHaveLength(1);
      const job = claimed.jobs[0];
      expect(job.job_id).toBe(4);
      expect(job.attempt).toBe(1);
      expect(job.metadata["X-WEBHOOK-PATH"]).toBe("/pull");
      expect(job.metadata["X-WEBHOOK-ORIGIN"]).toBe("webhook");
      expect(Buffer.from(job.body_base64, "base64").equals(Buffer.from(payload))).toBe(true);
      const extended = await (await pull(`${job.call_id}/extend`, { attempt: 1, lease_ms: 60_000 })).json();
      expect(extended).toEqual({ call_id: job.call_id, lease_until: t.clock.now() + 60_000 });
      expect((await pull(`${job.call_id}/ack`, { attempt: 2 })).status).toBe(409);
      expect(await (await pull(`${job.call_id}/ack`, { attempt: 1 })).json()).toEqual({ call_id: job.call_id, state: "done" });
      expect((await pull(`${job.call_id}/ack`, { attempt: 1 })).status).toBe(409);
    });

    test("a runner's reported error is stored with the config's secrets redacted (regression: a pull runner's error kept the pull token)", async () => {
      const own = await build({ endpoints: [{ path: "/hook", job_id: 6, auth: "bearer", secret: "hook-token-abc" }], pull_token: "pull-token-123" });
      try {
        expect((await own.post("/hook", "x", { authorization: "Bearer hook-token-abc" })).status).toBe(202);
        const auth = { authorization: "Bearer pull-token-123", "content-type": "application/json" };
        const claimed = (await (await own.request("/webhooks/jobs/claim", { method: "POST", headers: auth, body: "{}" })).json()) as {
          jobs: Array<{ call_id: number }>;
        };
        const callId = claimed.jobs[0].call_id;
        const error = "runner log: token=pull-token-123 hook=hook-token-abc";
        expect(
          (await own.request(`/webhooks/jobs/${callId}/fail`, { method: "POST", headers: auth, body: JSON.stringify({ attempt: 1, error }) })).status,
        ).toBe(200);
        expect((await listJobs(own.main.db, {})).find((j) => j.callId === callId)?.lastError).toBe("runner log: token=[redacted] hook=[redacted]");
      } finally {
        own.close();
      }
    });

    test("fail puts the call back; bad input is 400, never 500", async () => {
      expect((await t.post("/pull", "again")).status).toBe(202);
      const { jobs } = (await (await pull("claim", { job_ids: [4] })).json()) as { jobs: any[] };
      const response = await pull(`${jobs[0].call_id}/fail`, { attempt: 1, error: "runner crashed" });
      expect(await response.json()).toEqual({ call_id: jobs[0].call_id, state: "pending" });
      expect((await pull("claim", { max: 0 })).status).toBe(400);
      expect((await pull("claim", { job_ids: "x" })).status).toBe(400);
      expect((await pull(`${jobs[0].call_id}/ack`, {})).status).toBe(400);
      expect((await t.request("/webhooks/jobs/claim", { method: "POST", headers: { authorization: "Bearer pull-secret" }, body: "{not json" })).status).toBe(
        400,
      );
      expect((await pull("nothing-here", {})).status).toBe(404);
    });
  });

  describe("max_pending_bytes", () => {
    test("past it a verified request gets 503 with Retry-After; deliveries make room again (regression: a flood of large bodies grew the outbox without bound)", async () => {
      const own = await build({ endpoints: [{ path: "/big", job_id: 9 }], max_pending_bytes: 2_500, retry_after_s: 7 });
      try {
        const kilobyte = "x".repeat(1_000);
        expect((await own.post("/big", kilobyte)).status).toBe(202);
        expect((await own.post("/big", kilobyte)).status).toBe(202);
        const refused = await own.post("/big", kilobyte);
        expect(refused.status).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("7");
        expect(await refused.json()).toEqual({ error: "unavailable" });
        expect((await own.post("/big", "small")).status).toBe(202); // what still fits is taken
        const [call] = await own.outbox.claim({ jobIds: [9] });
        expect(await own.outbox.ack(call.callId, call.attempt)).toBe(true);
        expect((await own.post("/big", kilobyte)).status).toBe(503); // counted again at most once a second
        own.clock.advance(1_000);
        expect((await own.post("/big", kilobyte)).status).toBe(202);
        expect(await listJobs(own.main.db)).toHaveLength(4);
      } finally {
        own.close();
      }
    });

    test("concurrent requests, a restart and redeliveries at the bound (regressions: 40 at once all got in; each restart let in another bound; a redelivery got 503)", async () => {
      const own = await build({ endpoints: [{ path: "/big", job_id: 9, dedupe_header: "X-Id" }], max_pending_bytes: 2_500 });
      try {
        const kilobyte = "x".repeat(1_000);
        const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => own.post("/big", kilobyte, { "x-id": `d${i}` }).then((r) => r.status)));
        expect(statuses.filter((s) => s === 202)).toHaveLength(2);
        expect(statuses.filter((s) => s === 503)).toHaveLength(8);
        // A redelivery of a stored call takes no room: 202 with the original call_id.
        const again = await own.post("/big", kilobyte, { "x-id": "d0" });
        expect(again.status).toBe(202);
        const reopened = outboxFor(own.config, engine === "sqlite" ? join(own.dir, "modelgate.db") : own.main.db, { now: own.clock.now });
        await expect(
          reopened.append({ jobId: 9, serviceId: 1, path: "/big", name: null, body: new TextEncoder().encode(kilobyte), contentType: null, dedupeKey: null }),
        ).rejects.toBeInstanceOf(OutboxFullError);
        await reopened.close();
      } finally {
        own.close();
      }
    });
  });
});
