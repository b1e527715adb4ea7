/**
 * Data-access tests run on both engines: SQLite in memory, and a real PostgreSQL 15 (one cluster
 * per test file from ./postgres.ts, started before its first test and stopped after its last).
 * Called at the top of a test file; each `open()` gives a fresh, empty, migrated database.
 */
import { afterAll, beforeAll } from "bun:test";
import { openDatabase, type Db } from "../../src/db/client";
import type { Engine } from "../../src/db/engine";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import { startPostgres, type RunningPostgres } from "./postgres";

export function bothEngines(options: { poolSize?: number } = {}): Array<[Engine, () => Promise<Db>]> {
  let pg: RunningPostgres | undefined;
  const opened: OpenedStorage[] = [];
  beforeAll(async () => {
    pg = await startPostgres();
  });
  afterAll(async () => {
    for (const storage of opened.splice(0)) await storage.close();
    await pg?.stop();
  });
  const onPostgres = async (): Promise<Db> => {
    if (!pg) throw new Error("bothEngines: Postgres is not started yet (open a database inside a test)");
    const url = await pg.createDatabase(`test_${opened.length + 1}`);
    const storage = await openStorage({ dataDir: "unused", url, poolSize: options.poolSize ?? 2 });
    opened.push(storage);
    return storage.db;
  };
  return [
    ["sqlite", async () => openDatabase(":memory:").db],
    ["postgres", onPostgres],
  ];
}
