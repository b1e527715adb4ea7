/**
 * MODELGATE_TEST_POSTGRES=1 (`make test-postgres`) runs every gateway ./binary.ts starts on a
 * Postgres + Redis deployment instead of SQLite and memory, so the binary suites run once more as
 * issue 36 asks. One PostgreSQL cluster and one redis-server serve the whole test process: started
 * on first use, stopped after the last test (./preload.ts). Each data directory gets a fresh database and a Redis
 * database number of its own, so tests never meet one another's rows, limits or replay records,
 * and a gateway restarted on the same directory (or replicas sharing one) find the same data.
 */
import { SQL } from "bun";
import { startPostgres, type RunningPostgres } from "./postgres";
import { startRedis, type RunningRedis } from "./redis";

export const ON_POSTGRES = process.env.MODELGATE_TEST_POSTGRES === "1";

export interface SharedStorage {
  /** postgres://…/gw_N: this data directory's own database. */
  databaseUrl: string;
  /** redis://…/N: this data directory's own numbered database. */
  redisUrl: string;
}

/** More than 16 numbered databases: a run starts a few hundred gateways. */
const REDIS_DATABASES = 4_096;

let started: Promise<{ pg: RunningPostgres; redis: RunningRedis; admin: SQL }> | null = null;
const byDir = new Map<string, Promise<SharedStorage>>();

function deployment(): Promise<{ pg: RunningPostgres; redis: RunningRedis; admin: SQL }> {
  started ??= (async () => {
    // Several gateways at once, each with its pool, beside the tests' own clients.
    const pg = await startPostgres({ maxConnections: 500 });
    const redis = await startRedis({ databases: REDIS_DATABASES });
    return { pg, redis, admin: new SQL({ url: `postgres://postgres@127.0.0.1:${pg.port}/postgres`, max: 1 }) };
  })();
  return started;
}

/** Stops the cluster and Redis, if this process started them. */
export async function stopSharedStorage(): Promise<void> {
  if (started === null) return;
  const { pg, redis, admin } = await started;
  started = null;
  await admin.close();
  await Promise.all([pg.stop(), redis.stop()]);
}

/** The database and Redis for the gateways of data directory `dir`, made on first use. */
export function sharedStorage(dir: string): Promise<SharedStorage> {
  let storage = byDir.get(dir);
  if (!storage) {
    const n = byDir.size + 1;
    storage = (async () => {
      const { pg, redis, admin } = await deployment();
      await admin.unsafe(`CREATE DATABASE gw_${n}`);
      return { databaseUrl: `postgres://postgres@127.0.0.1:${pg.port}/gw_${n}`, redisUrl: `${redis.url}/${n % REDIS_DATABASES}` };
    })();
    byDir.set(dir, storage);
  }
  return storage;
}

/**
 * `config` with the tables that put a gateway on `storage`, for each of the two it does not name
 * itself, and the database it then serves from (null when the config names its own).
 */
export function withSharedStorage(config: string, storage: SharedStorage): { config: string; databaseUrl: string | null } {
  const ownDatabase = /^\[database\]/m.test(config);
  const tables = [];
  if (!ownDatabase) tables.push(`[database]\nurl = "${storage.databaseUrl}"\n`);
  if (!/^\[cluster\]/m.test(config)) tables.push(`[cluster]\nredis_url = "${storage.redisUrl}"\n`);
  return { config: `${config}\n${tables.join("\n")}`, databaseUrl: ownDatabase ? null : storage.databaseUrl };
}
