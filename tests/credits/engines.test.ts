// Credits, the request log, usage and pruning on both engines: SQLite (a file, two connections as
// two processes) and a real PostgreSQL 15 (two handles on one database as two replicas). Balances
// move atomically, so replicas debiting one user together lose nothing; the meter's group commit
// has the debit committed when settle()'s promise resolves; a batch the database refuses stays
// queued; the usage export streams and sums to the ledger; one pruner runs at a time.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { parseCredits } from "../../src/credits/amount";
import { createDebitWriter, getBalance, grantCredits, keySpendSince, listLedger, refundCredits, type Debit } from "../../src/credits/ledger";
import { createCreditMeter } from "../../src/credits/meter";
import { recentUsage } from "../../src/credits/usage";
import { usageChunks } from "../../src/credits/usage-export";
import { requestLogPage } from "../../src/dashboard/request-log-query";
import { dailyUsage, recentRequests } from "../../src/dashboard/usage-query";
import type { Db } from "../../src/db/client";
import { postgresOf, tablesOf } from "../../src/db/engine";
import { createLease } from "../../src/db/lease";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import type { RequestRecord } from "../../src/requests/record";
import { requestRecord } from "../support/request-record";
import { createRequestLog, pruneRequestLog } from "../../src/requests/log";
import { startPostgres, type RunningPostgres } from "../support/postgres";
import { captureLog } from "../support/log";

let pg: RunningPostgres;
const opened: OpenedStorage[] = [];
beforeAll(async () => {
  pg = await startPostgres();
});
afterEach(async () => {
  for (const storage of opened.splice(0)) await storage.close();
});
afterAll(async () => {
  await pg?.stop();
});

let databases = 0;
/** A fresh database on `engine`, opened twice: two processes (SQLite) or two replicas (Postgres). */
async function twoHandles(engine: string): Promise<[Db, Db]> {
  let options: { dataDir: string; url?: string; poolSize?: number };
  if (engine === "postgres") options = { dataDir: "unused", url: await pg.createDatabase(`credits_${++databases}`), poolSize: 4 };
  else options = { dataDir: mkdtempSync(join(tmpdir(), "modelgate-credits-")) };
  const first = await openStorage(options);
  const second = await openStorage(options);
  opened.push(first, second);
  return [first.db, second.db];
}

async function newUser(db: Db, email: string): Promise<number> {
  const { users } = tablesOf(db);
  const [row] = await db.insert(users).values({ email }).returning({ id: users.id });
  return row.id;
}

function debit(userId: number, micro: number, i: number, model = "m"): Debit {
  return { userId, keyId: null, micro, requestId: `req_${i}`, model, at: 1_000 + i };
}

function record(i: number, fields: Partial<RequestRecord> = {}): RequestRecord {
  return requestRecord({ requestId: `req_${i}`, createdAt: 1_000_000 + i, identity: "api_key", ...fields });
}

/** A write that resolves on either engine (synchronous on SQLite). */
async function written(result: void | Promise<void>): Promise<void> {
  await result;
}

async function ledgerSum(db: Db, userId: number): Promise<number> {
  return (await listLedger(db, { userId, limit: 100_000 })).reduce((sum, row) => sum + row.micro, 0);
}

describe.each(["sqlite", "postgres"])("on %s", (engine) => {
  test("grants, refunds and debits move the balance, and the ledger sums to it", async () => {
    const [db] = await twoHandles(engine);
    const userId = await newUser(db, "grant@example.com");
    expect(await getBalance(db, userId)).toBe(0);
    expect(await grantCredits(db, { userId, micro: 2_000_000, note: "welcome" })).toBe(2_000_000);
    expect(await refundCredits(db, { userId, micro: 500, requestId: "req_x" })).toBe(2_000_500);
    await written(createDebitWriter(db)([debit(userId, 300, 1), debit(userId, 200, 2), debit(userId, 50, 3, "other")]));
    expect(await getBalance(db, userId)).toBe(2_000_500 - 550);
    expect(await ledgerSum(db, userId)).toBe(2_000_500 - 550);
    const debits = (await listLedger(db, { userId })).filter((row) => row.kind === "debit");
    expect(debits.map(({ model, micro, requestId, note }) => ({ model, micro, requestId, note })).sort((a, b) => a.micro - b.micro)).toEqual([
      { model: "m", micro: -500, requestId: null, note: "2 requests" },
      { model: "other", micro: -50, requestId: "req_3", note: null },
    ]);
    expect(await grantCredits(db, { userId, micro: parseCredits("1000000000")! * 9 })).toBeNull(); // past 9 billion credits
    expect(await getBalance(db, userId)).toBe(2_000_500 - 550);
    expect(() => grantCredits(db, { userId, micro: 0 })).toThrow();
  });

  test("two handles debiting and granting one user at once lose nothing", async () => {
    const [a, b] = await twoHandles(engine);
    const userId = await newUser(a, "shared@example.com");
    await grantCredits(a, { userId, micro: 10_000_000 });
    const writeA = createDebitWriter(a);
    const writeB = createDebitWriter(b);
    const batches: Array<Promise<unknown>> = [];
    for (let i = 0; i < 40; i++) {
      batches.push(written(writeA([debit(userId, 7, i), debit(userId, 3, i + 1000)])));
      batches.push(written(writeB([debit(userId, 11, i + 2000)])));
      // On SQLite both handles are in this one process, whose event loop a second connection's
      // busy wait would hold: grants go through one (two processes wait for each other there).
      if (i % 10 === 0) batches.push(grantCredits(i % 20 === 0 || engine === "sqlite" ? a : b, { userId, micro: 1_000 }));
    }
    await Promise.all(batches);
    const expected = 10_000_000 + 4 * 1_000 - 40 * (7 + 3 + 11);
    expect(await getBalance(a, userId)).toBe(expected);
    expect(await getBalance(b, userId)).toBe(expected);
    expect(await ledgerSum(b, userId)).toBe(expected);
  });

  test("a settled debit is committed when settle()'s promise resolves, and another handle sees it", async () => {
    const [a, b] = await twoHandles(engine);
    const userId = await newUser(a, "meter@example.com");
    await grantCredits(a, { userId, micro: 1_000_000 });
    const meter = createCreditMeter(a, { intervalMs: 60_000 });
    try {
      const holds = [meter.reserve(userId, 100, null), meter.reserve(userId, 100, null)];
      const commits = holds.map((hold, i) => meter.settle(hold, { costMicro: 40, requestId: `req_${i}`, model: "m", at: 5_000 }));
      expect(meter.outstanding(userId)).toBe(80);
      await Promise.all(commits);
      expect(await getBalance(b, userId)).toBe(1_000_000 - 80);
      expect(meter.outstanding(userId)).toBe(0);
    } finally {
      await meter.close();
    }
  });

  test("a key's spend since a time sums its debits", async () => {
    const [db] = await twoHandles(engine);
    const userId = await newUser(db, "key@example.com");
    await written(
      createDebitWriter(db)([
        { ...debit(userId, 30, 1), keyId: "k1", at: 100 },
        { ...debit(userId, 5, 2, "other"), keyId: "k1", at: 200 },
        { ...debit(userId, 9, 3), keyId: "k2", at: 200 },
      ]),
    );
    expect(await keySpendSince(db, "k1", 0)).toBe(35);
    expect(await keySpendSince(db, "k1", 150)).toBe(5);
    expect(await keySpendSince(db, "nobody", 0)).toBe(0);
  });

  test("the request log writes a batch, and the dashboard's and usage queries filter it", async () => {
    const [db] = await twoHandles(engine);
    const userId = await newUser(db, "log@example.com");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now, firstPruneMs: 3_600_000 });
    try {
      const rows = Array.from({ length: 70 }, (_, i) =>
        record(i, { userId, model: i % 2 === 0 ? "even" : "odd", status: i % 7 === 0 ? 429 : 200, costMicro: i, createdAt: 86_400_000 + i }),
      );
      await written(log.insert(rows));
      const page = await requestLogPage(db, { userId, model: "even", status: "2xx" });
      expect(page.length).toBe(30); // 35 even, 5 of them (0, 14, 28, 42, 56) refused
      expect(page[0]).toMatchObject({ requestId: "req_68", email: "log@example.com", model: "even", status: 200, costMicro: 68, latencyMs: 2 });
      expect(page.map((r) => r.id)).toEqual([...page.map((r) => r.id)].sort((x, y) => y - x));
      const older = await requestLogPage(db, { userId, status: "429", before: page[10].id });
      expect(older.every((r) => r.status === 429 && r.id < page[10].id)).toBe(true);
      expect(await requestLogPage(db, { userId, from: 86_400_000 + 69 })).toHaveLength(1);
      const usage = await recentUsage(db, { userId, since: 0 });
      expect(usage).toEqual([
        { model: "odd", requests: 35, promptTokens: 105, completionTokens: 140, costMicro: 35 * 35 },
        { model: "even", requests: 35, promptTokens: 105, completionTokens: 140, costMicro: 34 * 35 },
      ]);
      const daily = await dailyUsage(db, { userId, since: 0 });
      expect(daily.sort((x, y) => x.model.localeCompare(y.model))).toEqual([
        { day: "1970-01-02", model: "even", requests: 35, tokens: 245, costMicro: 34 * 35 },
        { day: "1970-01-02", model: "odd", requests: 35, tokens: 245, costMicro: 35 * 35 },
      ]);
      expect((await recentRequests(db, { userId, limit: 2 })).map((r) => r.requestId)).toEqual(["req_69", "req_68"]);
    } finally {
      log.close();
    }
  });

  test("the usage export streams every row in chunks, and its credits sum to the ledger's debits", async () => {
    const [db] = await twoHandles(engine);
    const userId = await newUser(db, "export@example.com");
    const log = createRequestLog(db, { retainDays: 90, now: Date.now, firstPruneMs: 3_600_000 });
    const writeDebits = createDebitWriter(db);
    const count = 1_234; // more than two chunks of 500
    const records = Array.from({ length: count }, (_, i) => record(i, { userId, costMicro: 1 + (i % 97), createdAt: 2_000_000 + Math.floor(i / 3) }));
    await written(log.insert(records));
    await written(writeDebits(records.map((r, i) => debit(userId, r.costMicro, i))));
    log.close();
    const chunks: string[] = [];
    for await (const chunk of usageChunks(db, { userId }, "csv")) chunks.push(chunk);
    expect(chunks.length).toBeGreaterThan(2);
    const lines = chunks.join("").trimEnd().split("\r\n");
    expect(lines[0]).toBe("time,user,key_name,key_prefix,model,endpoint,status,tokens_in,tokens_out,credits,latency_ms,request_id");
    expect(lines).toHaveLength(count + 1);
    const credits = lines.slice(1).map((line) => parseCredits(line.split(",")[9])!);
    const ids = lines.slice(1).map((line) => line.split(",")[11]);
    expect(new Set(ids).size).toBe(count);
    expect(credits.reduce((sum, micro) => sum + micro, 0)).toBe(-(await ledgerSum(db, userId)));
    const json: unknown[] = [];
    for await (const chunk of usageChunks(db, { userId, from: 2_000_000 + 400 }, "json")) json.push(chunk);
    expect(JSON.parse(json.join(""))).toHaveLength(count - 1_200);
  });

  test("one pruner at a time: another holder's lease skips the prune, and two at once delete each row once", async () => {
    const [a, b] = await twoHandles(engine);
    const log = createRequestLog(a, { retainDays: 90, now: Date.now, firstPruneMs: 3_600_000 });
    await written(log.insert(Array.from({ length: 12_000 }, (_, i) => record(i, { createdAt: 1_000 + i }))));
    await written(log.insert([record(99_999, { createdAt: 50_000 })]));
    log.close();
    const { requestLog } = tablesOf(a);
    const left = async (): Promise<number> => (await a.select({ id: requestLog.id }).from(requestLog)).length;
    if (engine === "postgres") {
      const other = createLease(b, "prune:request_log", { holder: "another replica", ttlMs: 60_000, now: Date.now });
      expect(await other.acquire()).toBe(true);
      expect(await pruneRequestLog(a, 20_000)).toBe(0);
      expect(await left()).toBe(12_001);
      await other.release();
    }
    const pruned = await Promise.all([pruneRequestLog(a, 20_000), pruneRequestLog(b, 20_000)]);
    expect(pruned[0] + pruned[1]).toBe(12_000);
    if (engine === "postgres") expect(pruned).toContain(0);
    expect(await a.select({ requestId: requestLog.requestId }).from(requestLog)).toEqual([{ requestId: "req_99999" }]);
  });
});

describe("on postgres", () => {
  test("a debit batch the database refuses stays queued, still held, and is written once later", async () => {
    const [a, b] = await twoHandles("postgres");
    const userId = await newUser(a, "refused@example.com");
    await grantCredits(a, { userId, micro: 1_000_000 });
    const captured = captureLog();
    const meter = createCreditMeter(a, { intervalMs: 60_000 });
    const sql = postgresOf(b)!;
    try {
      await sql`ALTER TABLE ledger RENAME TO ledger_away`;
      await meter.settle(meter.reserve(userId, 100, null), { costMicro: 60, requestId: "req_r", model: "m", at: 1 });
      expect(meter.unrecordedSince()).not.toBeNull();
      expect(meter.outstanding(userId)).toBe(60);
      await sql`ALTER TABLE ledger_away RENAME TO ledger`;
      expect(await meter.close(5_000)).toEqual([]);
      expect(meter.outstanding(userId)).toBe(0);
      const { ledger } = tablesOf(b);
      expect(await b.select({ micro: ledger.micro }).from(ledger).where(eq(ledger.kind, "debit"))).toEqual([{ micro: -60 }]);
      expect(await getBalance(b, userId)).toBe(1_000_000 - 60);
    } finally {
      captured.restore();
    }
  });
});
