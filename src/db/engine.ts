/**
 * One database handle for both engines. Data access code takes a `Db`, reads its tables with
 * `tablesOf(db)` and awaits every query: Drizzle's builder is the same on SQLite and on Postgres
 * once each engine's own table objects are used (tests/db/dialects.test.ts holds that). A
 * Postgres handle is a Drizzle instance over Bun.sql, typed as the SQLite one and registered
 * here; where the engines need different SQL (prepared statements on the hot path, PRAGMAs,
 * `FOR UPDATE SKIP LOCKED`), `postgresOf(db)` says which one it is.
 *
 * Postgres' tables (drizzle-orm/pg-core) are registered by src/db/postgres.ts, never imported
 * here, so a SQLite server never loads them.
 */
import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import type { Db } from "./client";
import * as sqliteTables from "./schema";
import { GatewayError } from "../errors";

export type Tables = typeof sqliteTables;
export type Engine = "sqlite" | "postgres";

interface PostgresHandle {
  sql: SQL;
  tables: Tables;
}

const postgresHandles = new WeakMap<object, PostgresHandle>();

/** Registers `db` (a Drizzle instance over `sql`) as a Postgres handle with `tables` in use. */
export function registerPostgres(db: object, sql: SQL, tables: Tables): void {
  postgresHandles.set(db, { sql, tables });
}

/** The Bun.sql client behind a Postgres handle (a transaction's own inside `transact`); null on SQLite. */
export function postgresOf(db: Db): SQL | null {
  return postgresHandles.get(db)?.sql ?? null;
}

export function engineOf(db: Db): Engine {
  return postgresHandles.has(db) ? "postgres" : "sqlite";
}

/** The table objects to build queries with on this handle's engine. */
export function tablesOf(db: Db): Tables {
  return postgresHandles.get(db)?.tables ?? sqliteTables;
}

/** The bun:sqlite connection behind a SQLite handle; throws on Postgres (`what` names the caller). */
export function sqliteOf(db: Db, what: string): Database {
  if (postgresHandles.has(db)) throw new Error(`${what} works on SQLite only`);
  return db.$client;
}

const sqliteQueues = new WeakMap<Database, Promise<unknown>>();

/**
 * Runs `work` in one transaction and returns what it returns; a throw rolls everything back.
 * `work` must await only queries on the `tx` it is given. On Postgres that is a connection of the
 * pool's own for the transaction. On SQLite it is the one connection: transactions run one after
 * another (queued here), begin IMMEDIATE (the write lock up front, so none fails half-way on a
 * busy lock), and since every SQLite query resolves at once, a transaction ends within the turn
 * it started in unless `work` awaits something else.
 */
export async function transact<T>(db: Db, work: (tx: Db) => Promise<T>): Promise<T> {
  const pg = postgresHandles.get(db);
  if (pg) {
    const { drizzle } = await import("drizzle-orm/bun-sql");
    return (await pg.sql.begin(async (txSql) => {
      const tx = drizzle({ client: txSql as unknown as SQL, schema: pg.tables }) as unknown as Db;
      registerPostgres(tx, txSql as unknown as SQL, pg.tables);
      return work(tx);
    })) as T;
  }
  const sqlite = db.$client;
  const before = sqliteQueues.get(sqlite) ?? Promise.resolve();
  const run = before.then(async () => {
    sqlite.run("BEGIN IMMEDIATE");
    try {
      const result = await work(db);
      sqlite.run("COMMIT");
      return result;
    } catch (err) {
      if (sqlite.inTransaction) sqlite.run("ROLLBACK");
      throw err;
    }
  });
  sqliteQueues.set(
    sqlite,
    run.catch(() => undefined),
  );
  return run;
}

/**
 * True when `err` is a unique (or primary key) constraint refusing a row, on either engine, raw or
 * wrapped by Drizzle (which puts the driver's error in `cause` on Postgres): bun:sqlite's codes
 * SQLITE_CONSTRAINT_UNIQUE / _PRIMARYKEY, Bun.sql's SQLSTATE 23505 in `errno`.
 */
export function isUniqueViolation(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const { code, errno } = e as { code?: unknown; errno?: unknown };
    if (code === "SQLITE_CONSTRAINT_UNIQUE" || code === "SQLITE_CONSTRAINT_PRIMARYKEY" || errno === "23505" || code === "23505") return true;
  }
  return false;
}

/**
 * Bun.sql's codes for a connection it could not open or lost, and Postgres' own refusals while it
 * stops or starts (SQLSTATE 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now).
 */
const UNREACHABLE_CODE = /^ERR_POSTGRES_(CONNECTION_|IDLE_TIMEOUT|LIFETIME_TIMEOUT)/;
const UNREACHABLE_STATE = new Set(["57P01", "57P02", "57P03"]);

/**
 * The answer to a request that failed because Postgres could not be reached: a 503 the client may
 * try again (nothing was served or charged: every read a request needs comes before its upstream
 * call), not a 500. Null for any other error. The error may be wrapped by Drizzle (in `cause`).
 */
export function databaseUnavailable(err: unknown): GatewayError | null {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 3; e = e.cause, depth++) {
    const { code, errno } = e as { code?: unknown; errno?: unknown };
    if (UNREACHABLE_CODE.test(String(code ?? "")) || UNREACHABLE_STATE.has(String(errno ?? code ?? ""))) {
      return new GatewayError("service_unavailable", "The gateway's database cannot be reached; try again shortly", { headers: { "retry-after": "2" } });
    }
  }
  return null;
}
