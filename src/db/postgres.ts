/**
 * Opens a Postgres database (`[database] url`) with Bun's own client (Bun.sql) wrapped in Drizzle,
 * and applies the migrations embedded from drizzle/pg/. Bookkeeping is drizzle-kit's own
 * (`drizzle.__drizzle_migrations`, hashes and all), so `drizzle-kit migrate` and the binary agree
 * on what has run. Replicas starting at once take turns on a transaction-scoped advisory lock, so
 * a migration runs once. As for SQLite (./migrate.ts), a database migrated past this binary's
 * last migration is refused, changed in nothing.
 */
import { SQL } from "bun";
import { drizzle, type BunSQLDatabase } from "drizzle-orm/bun-sql";
import { migrations } from "./migrations-pg.gen";
import * as schema from "./schema-pg";
import { registerPostgres, type Tables } from "./engine";
import { describePostgresUrl as describe } from "./where";

export type PgDb = BunSQLDatabase<typeof schema> & { $client: SQL };

export interface OpenedPg {
  db: PgDb;
  sql: SQL;
  /** The tags of the embedded migrations this open applied, oldest first. */
  applied: string[];
  close(): Promise<void>;
}

/** The advisory lock key migrations hold ("mgmigrat" in ASCII), distinct from any lease's. */
const MIGRATION_LOCK = 0x6d676d6967726174n;

/** `url` is a secret (it may hold a password): errors name the host, never the URL. */
export async function openPostgres(url: string, options: { max?: number } = {}): Promise<OpenedPg> {
  const sql = new SQL({ url, max: options.max ?? 10 });
  let applied: string[];
  try {
    applied = await applyPgMigrations(sql);
  } catch (err) {
    await sql.close();
    throw new Error(`[database] url: cannot migrate the Postgres database at ${describe(url)} (${(err as Error)?.message ?? err})`);
  }
  const db = drizzle({ client: sql, schema }) as PgDb;
  registerPostgres(db, sql, schema as unknown as Tables);
  return { db, sql, applied, close: () => sql.close() };
}

/** Returns the tags of the migrations this call applied, oldest first. */
async function applyPgMigrations(sql: SQL): Promise<string[]> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
    await tx`CREATE SCHEMA IF NOT EXISTS drizzle`;
    await tx`CREATE TABLE IF NOT EXISTS drizzle.__drizzle_migrations (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at bigint)`;
    const [last] = (await tx`SELECT created_at FROM drizzle.__drizzle_migrations ORDER BY created_at DESC LIMIT 1`) as { created_at: string | number }[];
    const newest = migrations[migrations.length - 1];
    const lastWhen = last ? Number(last.created_at) : null;
    if (lastWhen !== null && lastWhen > newest.when) {
      throw new Error(
        `this database has been migrated by a newer modelgate (its schema is from ${isoDate(lastWhen)}; this release's is from ${isoDate(newest.when)}, ${newest.tag}); run that release or a later one`,
      );
    }
    const pending = migrations.filter((m) => lastWhen === null || lastWhen < m.when);
    for (const m of pending) {
      for (const statement of m.sql.split("--> statement-breakpoint")) {
        if (statement.trim()) await tx.unsafe(statement);
      }
      const hash = new Bun.CryptoHasher("sha256").update(m.sql).digest("hex");
      await tx`INSERT INTO drizzle.__drizzle_migrations (hash, created_at) VALUES (${hash}, ${m.when})`;
    }
    return pending.map((m) => m.tag);
  });
}

function isoDate(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
