// One Drizzle function, written against src/db/schema.ts's tables, run on SQLite and on a real
// PostgreSQL 15 with src/db/schema-pg.ts's tables in their place, gives the same rows: ids and
// times back as numbers (not bigint strings), flags as booleans, bodies as bytes, upserts and
// RETURNING alike. This is what lets the data access code be written once for both engines.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { openDatabase, type Db } from "../../src/db/client";
import { openPostgres, type OpenedPg } from "../../src/db/postgres";
import * as sqliteTables from "../../src/db/schema";
import * as pgTables from "../../src/db/schema-pg";
import { startPostgres, type RunningPostgres } from "../support/postgres";

type Tables = typeof sqliteTables;

let pg: RunningPostgres;
let opened: OpenedPg;
beforeAll(async () => {
  pg = await startPostgres();
  opened = await openPostgres(pg.url, { max: 2 });
});
afterAll(async () => {
  await opened?.close();
  await pg?.stop();
});

async function exercise(db: Db, t: Tables): Promise<unknown> {
  const [user] = await db.insert(t.users).values({ email: "a@example.com", isAdmin: true }).returning({ id: t.users.id });
  for (const micro of [5_000_000, 2_500_000]) {
    await db
      .insert(t.balances)
      .values({ userId: user.id, micro })
      .onConflictDoUpdate({ target: t.balances.userId, set: { micro: sql`${t.balances.micro} + ${micro}` } });
  }
  await db.insert(t.ledger).values({ userId: user.id, kind: "debit", micro: 2 ** 40, createdAt: 1_795_000_000_000 });
  const [call] = await db
    .insert(t.webhookJobs)
    .values({ jobId: 1, serviceId: 0, path: "/h", body: Buffer.from([0, 1, 255]), createdAt: 1 })
    .returning({ callId: t.webhookJobs.callId });
  const [row] = await db
    .select({ id: t.users.id, isAdmin: t.users.isAdmin, unverified: t.users.emailUnverified, micro: t.balances.micro, created: t.users.createdAt })
    .from(t.users)
    .innerJoin(t.balances, eq(t.balances.userId, t.users.id))
    .where(and(eq(t.users.email, "a@example.com"), eq(t.users.isAdmin, true)));
  const [debit] = await db.select({ micro: t.ledger.micro, at: t.ledger.createdAt }).from(t.ledger);
  const [job] = await db.select({ body: t.webhookJobs.body, state: t.webhookJobs.state }).from(t.webhookJobs).where(eq(t.webhookJobs.callId, call.callId));
  return { row: { ...row, created: typeof row.created }, debit, call, job: { state: job.state, body: [...job.body] } };
}

test("the same query code gives the same rows on SQLite and on Postgres", async () => {
  const sqlite = openDatabase(":memory:");
  const onSqlite = await exercise(sqlite.db, sqliteTables);
  sqlite.close();
  const onPostgres = await exercise(opened.db as unknown as Db, pgTables as unknown as Tables);
  expect(onSqlite).toEqual({
    row: { id: 1, isAdmin: true, unverified: true, micro: 7_500_000, created: "number" },
    debit: { micro: 2 ** 40, at: 1_795_000_000_000 },
    call: { callId: 1 },
    job: { state: "pending", body: [0, 1, 255] },
  });
  expect(onPostgres).toEqual(onSqlite);
});
