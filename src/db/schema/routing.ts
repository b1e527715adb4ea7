/** Routes discovery found, remembered across restarts. */
import { integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * The routes discovery imported, per upstream, so that after a restart they are served at once,
 * before the upstream answers discovery again. A poll's list replaces its upstream's rows (one
 * the upstream no longer lists is dropped); rows of an upstream the config no longer discovers
 * are never read. Written by src/router/remembered-routes.ts.
 */
export const discoveredRoutes = sqliteTable(
  "discovered_routes",
  {
    upstream: text("upstream").notNull(),
    model: text("model").notNull(),
    /** Its place in the upstream's list, so a restart keeps the order the upstream gave. */
    position: integer("position").notNull(),
    seenAt: integer("seen_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.upstream, t.model] })],
);
