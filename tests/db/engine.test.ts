// The handle both engines share (src/db/engine.ts) and the singleton lease (src/db/lease.ts), each
// run on SQLite and on a real PostgreSQL 15: a transaction commits together or not at all, and a
// lease has one holder at a time, passing to another only once it has expired or been released.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { openDatabase, type Db } from "../../src/db/client";
import { engineOf, tablesOf, transact } from "../../src/db/engine";
import { createLease } from "../../src/db/lease";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { startPostgres, type RunningPostgres } from "../support/postgres";

let pg: RunningPostgres;
let onPostgres: OpenedStorage;
beforeAll(async () => {
  pg = await startPostgres();
  onPostgres = await openStorage({ dataDir: "unused", url: pg.url, poolSize: 3 });
});
afterAll(async () => {
  await onPostgres?.close();
  await pg?.stop();
});

const engines: Array<[string, () => Db]> = [
  ["sqlite", () => openDatabase(":memory:").db],
  ["postgres", () => onPostgres.db],
];

describe.each(engines)("on %s", (engine, open) => {
  test("the handle names its engine and its tables", () => {
    const db = open();
    expect(engineOf(db)).toBe(engine as "sqlite" | "postgres");
    expect(tablesOf(db).users).toBeDefined();
  });

  test("a transaction commits all of its writes, or none when it throws", async () => {
    const db = open();
    const { users } = tablesOf(db);
    const email = `${engine}-tx@example.com`;
    await expect(
      transact(db, async (tx) => {
        await tx.insert(tablesOf(tx).users).values({ email });
        throw new Error("changed my mind");
      }),
    ).rejects.toThrow("changed my mind");
    expect(await db.select().from(users).where(eq(users.email, email))).toEqual([]);
    const id = await transact(db, async (tx) => {
      const [row] = await tx
        .insert(tablesOf(tx).users)
        .values({ email })
        .returning({ id: tablesOf(tx).users.id });
      return row.id;
    });
    const [row] = await db.select({ id: users.id }).from(users).where(eq(users.email, email));
    expect(row.id).toBe(id);
  });

  test("transactions started together all commit, one after another", async () => {
    const db = open();
    const { balances, ledger, users } = tablesOf(db);
    const [user] = await db
      .insert(users)
      .values({ email: `${engine}-counter@example.com` })
      .returning({ id: users.id });
    await db.insert(balances).values({ userId: user.id, micro: 0 });
    // Each awaits between its statements: on SQLite's one connection, a second BEGIN there would throw.
    const add = (): Promise<void> =>
      transact(db, async (tx) => {
        const t = tablesOf(tx);
        await tx.insert(t.ledger).values({ userId: user.id, kind: "grant", micro: 1, createdAt: 1 });
        await tx
          .update(t.balances)
          .set({ micro: sql`${t.balances.micro} + 1` })
          .where(eq(t.balances.userId, user.id));
      });
    await Promise.all(Array.from({ length: 20 }, add));
    const [after] = await db.select({ micro: balances.micro }).from(balances).where(eq(balances.userId, user.id));
    expect(after.micro).toBe(20);
    expect(await db.select().from(ledger).where(eq(ledger.userId, user.id))).toHaveLength(20);
  });

  test("a lease has one holder until it expires or is released", async () => {
    const db = open();
    let clock = 1_000_000;
    const now = (): number => clock;
    const name = `${engine}-discovery`;
    const a = createLease(db, name, { holder: "a", ttlMs: 10_000, now });
    const b = createLease(db, name, { holder: "b", ttlMs: 10_000, now });
    expect(await a.acquire()).toBe(true);
    expect(await b.acquire()).toBe(false);
    clock += 9_000;
    expect(await a.acquire()).toBe(true); // renewed until clock + 10 s
    clock += 9_000;
    expect(await b.acquire()).toBe(false);
    clock += 2_000; // a stopped renewing
    expect(await b.acquire()).toBe(true);
    expect(await a.acquire()).toBe(false);
    await b.release();
    expect(await a.acquire()).toBe(true);
  });
});
