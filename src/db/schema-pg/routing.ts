/** Routes discovery found, remembered across restarts. */
import { pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { int } from "./columns";

export const discoveredRoutes = pgTable(
  "discovered_routes",
  {
    upstream: text("upstream").notNull(),
    model: text("model").notNull(),
    position: int("position").notNull(),
    seenAt: int("seen_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.upstream, t.model] })],
);
