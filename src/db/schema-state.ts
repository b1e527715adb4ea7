/**
 * A Postgres schema's migration state against this release's embedded migrations, read from
 * drizzle's own bookkeeping without changing anything: for `config check` and the `database`
 * section of /api/status. The status reads it again at most every STATUS_REFRESH_MS, when asked:
 * /api/status is public, and a flood of it must not become a flood of queries.
 */
import type { SQL } from "bun";
import type { Db } from "./client";
import { postgresOf } from "./engine";
import { migrations } from "./migrations-pg.gen";

export interface SchemaState {
  /** How many migrations the database has recorded. */
  applied: number;
  /** This release's newest migration. */
  latest: string;
  /**
   * "current": this release's newest is the database's newest; "behind": some are still to be
   * applied (serve and `migrate` apply them); "newer": a newer release migrated it (this one
   * refuses to start on it); "empty": never migrated.
   */
  schema: "current" | "behind" | "newer" | "empty";
}

const STATUS_REFRESH_MS = 5_000;

export async function readSchemaState(sql: SQL): Promise<SchemaState> {
  const latest = migrations[migrations.length - 1];
  const [table] = (await sql`SELECT to_regclass('drizzle.__drizzle_migrations') IS NOT NULL AS present`) as { present: boolean }[];
  if (!table.present) return { applied: 0, latest: latest.tag, schema: "empty" };
  const [row] = (await sql`SELECT count(*)::int AS applied, max(created_at) AS newest FROM drizzle.__drizzle_migrations`) as {
    applied: number;
    newest: string | number | null;
  }[];
  const newest = row.newest === null ? null : Number(row.newest);
  const schema = newest === null ? "empty" : newest > latest.when ? "newer" : newest < latest.when ? "behind" : "current";
  return { applied: row.applied, latest: latest.tag, schema };
}

/**
 * The `database` section of /api/status on a Postgres handle: the engine, whether the last read
 * reached the database, and the schema's state; the whole status is "degraded" while it cannot
 * be reached. Where the database is stays in the log, as for Redis.
 */
export async function postgresStatusSection(db: Db, options: { now: () => number }): Promise<() => Record<string, unknown>> {
  const sql = postgresOf(db)!;
  let state = await readSchemaState(sql);
  let reachable = true;
  let readAt = options.now();
  let reading = false;
  return () => {
    if (!reading && options.now() - readAt >= STATUS_REFRESH_MS) {
      reading = true;
      readSchemaState(sql)
        .then((read) => {
          state = read;
          reachable = true;
        })
        .catch(() => {
          reachable = false;
        })
        .finally(() => {
          readAt = options.now();
          reading = false;
        });
    }
    const database = { engine: "postgres", reachable, migrations: { applied: state.applied, latest: state.latest, schema: state.schema } };
    return reachable ? { database } : { status: "degraded", database };
  };
}
