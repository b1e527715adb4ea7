// Postgres migrations (drizzle/pg/, embedded) on a real PostgreSQL 15: a fresh database gets every
// table of src/db/schema-pg.ts, a second open (another replica) applies nothing, and two opening
// at once apply each migration once.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openPostgres } from "../../src/db/postgres";
import { migrations } from "../../src/db/migrations-pg.gen";
import { startPostgres, type RunningPostgres } from "../support/postgres";

let pg: RunningPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.stop();
});

test("a fresh database is migrated once, even by two replicas starting together", async () => {
  const [a, b] = await Promise.all([openPostgres(pg.url, { max: 2 }), openPostgres(pg.url, { max: 2 })]);
  try {
    const applied = [a.applied, b.applied].sort((x, y) => y.length - x.length);
    expect(applied).toEqual([migrations.map((m) => m.tag), []]);
    const rows = (await a.sql`SELECT count(*)::int AS n FROM drizzle.__drizzle_migrations`) as { n: number }[];
    expect(rows[0].n).toBe(migrations.length);
    const tables = (await a.sql`SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`) as { table_name: string }[];
    expect(tables.map((t) => t.table_name)).toContain("webhook_jobs");
    const again = await openPostgres(pg.url, { max: 1 });
    expect(again.applied).toEqual([]);
    await again.close();
  } finally {
    await a.close();
    await b.close();
  }
});

test("a database migrated by a newer release is refused, and the URL's password is not in the error", async () => {
  const url = await pg.createDatabase("newer");
  const sql = pg.client("newer");
  await sql`CREATE SCHEMA drizzle`;
  await sql`CREATE TABLE drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`;
  await sql`INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES ('x', ${Date.UTC(2099, 0, 1)})`;
  const withPassword = url.replace("postgres@", "postgres:s3cret-pw@");
  const err = await openPostgres(withPassword, { max: 1 }).then(
    () => null,
    (e: Error) => e,
  );
  expect(err?.message).toContain("migrated by a newer modelgate");
  expect(err?.message).not.toContain("s3cret-pw");
  const tables = (await sql`SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'`) as { n: number }[];
  expect(tables[0].n).toBe(0);
});
