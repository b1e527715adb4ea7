/**
 * Another process holding the database's write lock, against the compiled binary. While it holds
 * it the server keeps answering (regression: every write-behind flush held the event loop for the
 * 5 s busy timeout) and keeps the request log's rows (they were dropped). A graceful stop writes
 * queued debits once the lock goes, within shutdown_grace_ms; past it they are logged as lost and
 * the process exits 1 (regression: they were dropped, and the exit was 0).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { HELLO, modelsToml } from "../auth/support";
import { eventually } from "../support/eventually";

const upstream = startMockUpstream();
const started: RunningGateway[] = [];
afterAll(async () => {
  for (const gw of started) if (gw.proc.exitCode === null) await gw.stop("SIGKILL");
  upstream.stop();
});

/** A gateway with a paid model, and a key whose user has 100 credits; the database locked by this process while `requests` paid requests are served. */
async function lockedWithDebits(graceMs: number, requests: number): Promise<{ gw: RunningGateway; lock: Database }> {
  const gw = await startGateway(`[server]\nshutdown_grace_ms = ${graceMs}\n${modelsToml(upstream.url)}`);
  started.push(gw);
  const { key } = await createUserKey(gw, { credits: "100" });
  const lock = new Database(join(gw.dir, "data", "modelgate.db"));
  lock.run("BEGIN IMMEDIATE");
  // All at once, so they land well inside one 250 ms debit flush (a flush against the lock waits out the busy timeout).
  const send = () =>
    fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(HELLO),
    });
  const statuses = (await Promise.all(Array.from({ length: requests }, send))).map((r) => r.status);
  if (statuses.some((s) => s !== 200)) throw new Error(`statuses ${statuses.join(", ")}:\n${gw.output()}`);
  return { gw, lock };
}

function debits(db: Database): { rows: number; micro: number; balance: number; sum: number } {
  const ledger = db.query("SELECT count(*) AS rows, coalesce(-sum(micro), 0) AS micro FROM ledger WHERE kind = 'debit'").get() as {
    rows: number;
    micro: number;
  };
  const balance = (db.query("SELECT micro FROM balances").get() as { micro: number }).micro;
  const sum = (db.query("SELECT sum(micro) AS sum FROM ledger").get() as { sum: number }).sum;
  return { ...ledger, balance, sum };
}

describe("a database locked by another process", () => {
  test("the server keeps answering, and writes the request log and debits once the lock goes", async () => {
    const { gw, lock } = await lockedWithDebits(5_000, 3);
    // Flushes fall due every 100 ms (request log) and 250 ms (debits); each used to wait 5 s on the lock.
    for (let i = 0; i < 6; i++) {
      const started = performance.now();
      expect((await fetch(`${gw.url}/api/health`)).status).toBe(200);
      expect(performance.now() - started).toBeLessThan(1_000);
      await Bun.sleep(100);
    }
    expect(debits(lock).rows).toBe(0);
    lock.run("COMMIT");
    const rows = () => (lock.query("SELECT count(*) AS n FROM request_log").get() as { n: number }).n;
    expect(await eventually(() => rows() === 3 && debits(lock).rows > 0, 5_000)).toBe(true);
    const after = debits(lock);
    expect(after.balance).toBe(after.sum);
    // How many rows the first refused write held depends on where the 100 ms flush falls among the answers.
    expect(gw.output()).toMatch(/request log: write failed, [123] row\(s\) kept to retry/);
    expect(gw.output()).toContain("request log: written again after");
    expect(gw.output()).not.toContain("dropped");
    lock.close();
  }, 30_000);
});

describe("the request-log prune under a lock", () => {
  test("the prune 5 s after start, refused by a lock held elsewhere, is put off: the server neither stalls nor dies (regression: a 5 s stall, then an uncaught error killed it)", async () => {
    const gw = await startGateway(modelsToml(upstream.url));
    started.push(gw);
    const lock = new Database(join(gw.dir, "data", "modelgate.db"));
    lock.run("BEGIN IMMEDIATE");
    try {
      const until = Date.now() + 6_500;
      while (Date.now() < until) {
        const asked = performance.now();
        expect((await fetch(`${gw.url}/api/health`)).status).toBe(200);
        expect(performance.now() - asked).toBeLessThan(1_000);
        await Bun.sleep(200);
      }
    } finally {
      lock.run("COMMIT");
      lock.close();
    }
    expect(gw.proc.exitCode).toBeNull();
    expect(gw.output()).toContain("request log: prune put off, the database refused it");
    expect((await fetch(`${gw.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ ...HELLO, model: "free-model" }) })).status).toBe(200);
  }, 30_000);
});

describe("a stop while the database is locked", () => {
  test("queued debits are written when the lock goes within the grace; exit 0", async () => {
    const { gw, lock } = await lockedWithDebits(12_000, 3);
    const stopped = gw.stop();
    // Longer than the 5 s busy timeout: one attempt to write fails, a later one succeeds.
    await Bun.sleep(6_000);
    lock.run("COMMIT");
    expect(await stopped).toBe(0);
    const after = debits(lock);
    expect(after.rows).toBeGreaterThan(0);
    expect(after.micro).toBeGreaterThan(0);
    expect(after.balance).toBe(after.sum);
    expect(after.balance).toBe(100_000_000 - after.micro);
    lock.close();
  }, 30_000);

  test("debits still unwritten after the grace are logged as lost; exit 1", async () => {
    const { gw, lock } = await lockedWithDebits(200, 2);
    expect(await gw.stop()).toBe(1);
    expect(gw.output()).toMatch(/credits: \d+ queued debit\(s\), 0\.\d{6} credits in all, could not be written before the stop and are lost/);
    lock.run("COMMIT");
    expect(debits(lock).rows).toBe(0);
    lock.close();
  }, 30_000);
});
