/**
 * Opens the database the config names: Postgres when `[database] url` is set, else SQLite in
 * server.data_dir. Either way the handle is a `Db` (./engine.ts), migrated to this release; and
 * what /api/status says of it.
 */
import type { Db } from "./client";
import type { Engine } from "./engine";
import { describePostgresUrl } from "./where";

export interface OpenedStorage {
  db: Db;
  engine: Engine;
  /** The tags of the embedded migrations this open applied, oldest first. */
  applied: string[];
  /** Where the data lives, for log lines: the SQLite file, or Postgres' host:port/database (never the URL). */
  where: string;
  close(): Promise<void>;
}

export async function openStorage(options: { dataDir: string; url?: string; poolSize?: number }): Promise<OpenedStorage> {
  if (options.url !== undefined) {
    const { openPostgres } = await import("./postgres");
    const pg = await openPostgres(options.url, { max: options.poolSize });
    return { db: pg.db as unknown as Db, engine: "postgres", applied: pg.applied, where: describePostgresUrl(options.url), close: pg.close };
  }
  const { openDatabase } = await import("./client");
  const sqlite = openDatabase(options.dataDir);
  return {
    db: sqlite.db,
    engine: "sqlite",
    applied: sqlite.applied,
    where: sqlite.sqlite.filename,
    close: async () => sqlite.close(),
  };
}

/** The `database` section of /api/status: the engine, and on Postgres the schema's migration state. */
export async function storageStatusSection(database: OpenedStorage): Promise<() => Record<string, unknown>> {
  if (database.engine === "sqlite") return () => ({ database: { engine: "sqlite" } });
  return (await import("./schema-state")).postgresStatusSection(database.db, { now: Date.now });
}
