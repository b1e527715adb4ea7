/**
 * The routes discovery imported, kept in the database (table discovered_routes), so that after a
 * restart the gateway serves them at once instead of answering 404 until each upstream answers
 * discovery again: start-up order does not matter. Each successful poll replaces its upstream's
 * rows, so a model the upstream stopped listing is forgotten then; a failed poll changes nothing.
 */
import { eq, asc } from "drizzle-orm";
import { brieflyLocked, type Db } from "../db/client";
import { discoveredRoutes } from "../db/schema";
import type { UpstreamConfig } from "../config/schema";
import type { Logger } from "../log";
import type { ModelRegistry } from "./registry";

export interface RouteMemory {
  /** Serves what each discovering upstream listed last time, until it answers again. */
  restore(registry: ModelRegistry, upstreams: UpstreamConfig[]): void;
  /** After a successful poll: writes the upstream's list when it differs from the one remembered. */
  remember(upstream: string, ids: string[]): void;
}

/**
 * The memory the server uses. A write waits for a lock as briefly as the other background writes
 * (brieflyLocked): one that fails is logged and tried again after the next poll.
 */
export function createRouteMemory(db: Db, options: { now: () => number; log: Logger["log"] }): RouteMemory {
  const written = new Map<string, string>();
  const write = brieflyLocked(db.$client, rememberRoutes);
  return {
    restore(registry, upstreams) {
      for (const upstream of upstreams.filter((u) => u.discover)) {
        const ids = rememberedRoutes(db, upstream.name);
        written.set(upstream.name, ids.join("\n"));
        if (ids.length === 0) continue;
        registry.setDiscovered(upstream, ids);
        options.log("info", `serving ${ids.length} remembered route(s) of upstream "${upstream.name}" until its discovery answers`);
      }
    },
    remember(upstream, ids) {
      const key = ids.join("\n");
      if (written.get(upstream) === key) return;
      try {
        write(db, { upstream, models: ids, now: options.now() });
        written.set(upstream, key);
      } catch (err) {
        options.log(
          "warn",
          `discovery: could not remember the routes of upstream "${upstream}" (tried again after its next poll): ${(err as Error)?.message ?? err}`,
        );
      }
    },
  };
}

/** The remembered model ids of one upstream, in the order its list gave them. */
function rememberedRoutes(db: Db, upstream: string): string[] {
  return db
    .select({ model: discoveredRoutes.model })
    .from(discoveredRoutes)
    .where(eq(discoveredRoutes.upstream, upstream))
    .orderBy(asc(discoveredRoutes.position))
    .all()
    .map((row) => row.model);
}

/** Replaces one upstream's remembered routes with what its last poll listed, in one transaction. */
function rememberRoutes(db: Db, options: { upstream: string; models: readonly string[]; now: number }): void {
  const { upstream, models, now } = options;
  db.transaction((tx) => {
    tx.delete(discoveredRoutes).where(eq(discoveredRoutes.upstream, upstream)).run();
    // Bound the statement's variables (4 per row): SQLite allows 32,766 in one statement.
    for (let start = 0; start < models.length; start += 500) {
      const rows = models.slice(start, start + 500).map((model, i) => ({ upstream, model, position: start + i, seenAt: now }));
      tx.insert(discoveredRoutes).values(rows).run();
    }
  });
}
