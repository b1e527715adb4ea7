import { describe, expect, test } from "bun:test";
import { openDatabase } from "../../src/db/client";
import { createRequestLog, pruneRequestLog } from "../../src/requests/log";
import type { RequestRecord } from "../../src/requests/record";
import { requestRecord } from "../support/request-record";

const DAY = 86_400_000;

function record(createdAt: number, requestId: string): RequestRecord {
  return requestRecord({ createdAt, requestId });
}

describe("request log", () => {
  test("a row keeps every field (latency rounded to whole ms)", () => {
    const { db, sqlite } = openDatabase(":memory:");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now });
    log.insert([record(1_000, "req_a")]);
    const row = sqlite.query("SELECT * FROM request_log").get() as Record<string, unknown>;
    expect(row).toMatchObject({
      request_id: "req_a",
      created_at: 1_000,
      identity: "anonymous",
      model: "m",
      upstream: "u",
      status: 200,
      prompt_tokens: 3,
      completion_tokens: 4,
      cost_micro: 7,
      latency_ms: 2,
    });
    log.close();
  });

  test("a batch larger than one multi-row insert lands whole, in order, each row with its own values", () => {
    const { db, sqlite } = openDatabase(":memory:");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now });
    // 70 rows: two full multi-row statements and a remainder of single-row ones.
    log.insert(
      Array.from({ length: 70 }, (_, i) => ({
        ...record(5_000 + i, `req_${i}`),
        userId: i % 3 === 0 ? null : i,
        keyId: i % 2 ? `key_${i}` : null,
        promptTokens: i,
        latencyMs: i + 0.4,
      })),
    );
    const rows = sqlite.query("SELECT request_id, created_at, user_id, key_id, prompt_tokens, latency_ms FROM request_log ORDER BY id").all();
    expect(rows).toEqual(
      Array.from({ length: 70 }, (_, i) => ({
        request_id: `req_${i}`,
        created_at: 5_000 + i,
        user_id: i % 3 === 0 ? null : i,
        key_id: i % 2 ? `key_${i}` : null,
        prompt_tokens: i,
        latency_ms: i,
      })),
    );
    log.close();
  });

  test("a batch the database refuses inserts nothing, not half of it", () => {
    const { db, sqlite } = openDatabase(":memory:");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now });
    const bad = { ...record(1, "req_bad"), model: null as unknown as string }; // model is NOT NULL
    expect(() => log.insert([...Array.from({ length: 40 }, (_, i) => record(i, `req_${i}`)), bad])).toThrow();
    expect(sqlite.query("SELECT count(*) AS n FROM request_log").get()).toEqual({ n: 0 });
    log.close();
  });

  test("the first prune runs soon after start, not an hour later (regression: restarts more often than hourly never pruned)", async () => {
    const { db, sqlite } = openDatabase(":memory:");
    const seed = createRequestLog(db, { retainDays: 90, now: Date.now });
    seed.insert([record(Date.now() - 100 * DAY, "req_old"), record(Date.now(), "req_new")]);
    seed.close();
    const log = createRequestLog(db, { retainDays: 90, now: Date.now, firstPruneMs: 0 });
    for (let i = 0; i < 100 && (sqlite.query("SELECT count(*) AS n FROM request_log").get() as { n: number }).n !== 1; i++) await Bun.sleep(5);
    expect(sqlite.query("SELECT request_id FROM request_log").all()).toEqual([{ request_id: "req_new" }]);
    log.close();
  });

  test("pruning deletes only rows older than the cut-off, across several chunks", async () => {
    const { db, sqlite } = openDatabase(":memory:");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now });
    const now = 200 * DAY;
    log.insert(Array.from({ length: 12_000 }, (_, i) => record(now - 100 * DAY + i, `old_${i}`)));
    log.insert(Array.from({ length: 30 }, (_, i) => record(now - DAY + i, `new_${i}`)));
    log.close();
    expect(await pruneRequestLog(db, now - 90 * DAY)).toBe(12_000);
    const left = sqlite.query("SELECT request_id FROM request_log ORDER BY id").all() as { request_id: string }[];
    expect(left).toHaveLength(30);
    expect(left.every((r) => r.request_id.startsWith("new_"))).toBe(true);
  });
});
