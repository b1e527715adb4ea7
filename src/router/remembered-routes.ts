/**
 * The routes discovery imported, kept in the database (table discovered_routes), so that after a
 * restart the gateway serves them at once instead of answering 404 until each upstream answers
 * discovery again: start-up order does not matter. Each successful poll replaces its upstream's
 * rows, so a model the upstream stopped listing is forgotten then; a failed poll changes nothing.
 * Where several processes share the database, one discovers at a time: the holder of the
 * "discovery" lease polls the upstreams and writes what they list; the others follow, serving what
 * it wrote (./discover.ts asks leads() before each poll).
 */
import { asc, eq } from "drizzle-orm";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf, tablesOf, transact } from "../db/engine";
import { createLease, processHolder } from "../db/lease";
import { keepLease, type LeaseKeeper } from "../db/lease-keeper";
import type { UpstreamConfig } from "../config/schema";
import type { Logger } from "../log";
import type { ModelRegistry } from "./registry";

export interface RouteMemory {
  /** Serves what each discovering upstream listed last time, until it answers again; a read the database refuses is logged. */
  restore(registry: ModelRegistry, upstreams: UpstreamConfig[]): Promise<void>;
  /** After a successful poll: writes the upstream's list when it differs from the one remembered. */
  remember(upstream: string, ids: string[]): Promise<void>;
  /** Whether this process discovers now (it holds the discovery lease, taken or renewed here). */
  leads(): Promise<boolean>;
  /** A follower's poll: serves the upstream's routes as the discovering process last wrote them. */
  follow(registry: ModelRegistry, upstream: UpstreamConfig): Promise<void>;
  /** Gives up the discovery lease (a clean stop). */
  close(): Promise<void>;
}

/** The discovery lease: renewed every 10 s, taken over 30 s after its holder died. */
const LEASE_TTL_MS = 30_000;

/**
 * The memory the server uses. A write waits for a lock as briefly as the other background writes
 * (brieflyLocked on SQLite): one that fails is logged and tried again after the next poll.
 */
export function createRouteMemory(db: Db, options: { now: () => number; log: Logger["log"]; holder?: string }): RouteMemory {
  const written = new Map<string, string>();
  const write = postgresOf(db) ? rememberRoutes : brieflyLocked(db.$client, rememberRoutesNow);
  // Taken at the first poll: a server with no discovering upstream never writes the lease.
  let lease: LeaseKeeper | null = null;
  const leaseKept = (): LeaseKeeper =>
    (lease ??= keepLease(createLease(db, "discovery", { holder: options.holder ?? processHolder(), ttlMs: LEASE_TTL_MS, now: options.now }), {
      ttlMs: LEASE_TTL_MS,
      now: options.now,
    }));
  return {
    async restore(registry, upstreams) {
      for (const upstream of upstreams.filter((u) => u.discover)) {
        let ids: string[];
        try {
          ids = await rememberedRoutes(db, upstream.name);
        } catch (err) {
          options.log("warn", `discovery: could not read the remembered routes of upstream "${upstream.name}": ${(err as Error)?.message ?? err}`);
          continue;
        }
        written.set(upstream.name, ids.join("\n"));
        if (ids.length === 0) continue;
        registry.setDiscovered(upstream, ids);
        options.log("info", `serving ${ids.length} remembered route(s) of upstream "${upstream.name}" until its discovery answers`);
      }
    },
    async remember(upstream, ids) {
      const key = ids.join("\n");
      if (written.get(upstream) === key) return;
      try {
        await write(db, { upstream, models: ids, now: options.now() });
        written.set(upstream, key);
      } catch (err) {
        options.log(
          "warn",
          `discovery: could not remember the routes of upstream "${upstream}" (tried again after its next poll): ${(err as Error)?.message ?? err}`,
        );
      }
    },
    leads: () => (leaseKept().holds() ? Promise.resolve(true) : leaseKept().renew()),
    async follow(registry, upstream) {
      const ids = await rememberedRoutes(db, upstream.name);
      written.set(upstream.name, ids.join("\n"));
      if (ids.join("\n") !== registry.discoveredIds(upstream.name).join("\n")) registry.setDiscovered(upstream, ids);
    },
    close: async () => lease?.stop(),
  };
}

/** The remembered model ids of one upstream, in the order its list gave them. */
async function rememberedRoutes(db: Db, upstream: string): Promise<string[]> {
  const { discoveredRoutes } = tablesOf(db);
  const rows = await db
    .select({ model: discoveredRoutes.model })
    .from(discoveredRoutes)
    .where(eq(discoveredRoutes.upstream, upstream))
    .orderBy(asc(discoveredRoutes.position));
  return rows.map((row) => row.model);
}

interface RoutesWrite {
  upstream: string;
  models: readonly string[];
  now: number;
}

/** Bounds a statement's variables (4 per row): SQLite allows 32,766 in one statement, Postgres 65,535. */
const ROWS_PER_STATEMENT = 500;

function rowsOf(write: RoutesWrite, start: number): Array<{ upstream: string; model: string; position: number; seenAt: number }> {
  return write.models.slice(start, start + ROWS_PER_STATEMENT).map((model, i) => ({ upstream: write.upstream, model, position: start + i, seenAt: write.now }));
}

/** Replaces one upstream's remembered routes with what its last poll listed, in one transaction. */
function rememberRoutes(db: Db, write: RoutesWrite): Promise<void> {
  return transact(db, async (tx) => {
    const { discoveredRoutes } = tablesOf(tx);
    await tx.delete(discoveredRoutes).where(eq(discoveredRoutes.upstream, write.upstream));
    for (let start = 0; start < write.models.length; start += ROWS_PER_STATEMENT) await tx.insert(discoveredRoutes).values(rowsOf(write, start));
  });
}

/** The same on SQLite, synchronously, so brieflyLocked bounds its wait for the write lock. */
function rememberRoutesNow(db: Db, write: RoutesWrite): void {
  const { discoveredRoutes } = tablesOf(db);
  db.transaction((tx) => {
    tx.delete(discoveredRoutes).where(eq(discoveredRoutes.upstream, write.upstream)).run();
    for (let start = 0; start < write.models.length; start += ROWS_PER_STATEMENT) tx.insert(discoveredRoutes).values(rowsOf(write, start)).run();
  });
}
