/** What replicas sharing one database coordinate through: leases and change counters. */
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * Who runs a singleton (discovery, pruning, the settlement worker, a job handler's consumer) when
 * several processes share the database: one row per name, held until `expires_at` and renewed by
 * its holder well before then (src/db/lease.ts).
 */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: integer("expires_at").notNull(),
});

/**
 * Counters other processes poll to learn that something they cache has changed, one row per
 * name. On Postgres, triggers (drizzle/pg/) bump `keys` in the transaction of every change to a
 * key or to its owner's disabled state (src/auth/key-verifier.ts polls it). SQLite's processes
 * read PRAGMA data_version instead, and this table stays empty there.
 */
export const changeCounters = sqliteTable("change_counters", {
  name: text("name").primaryKey(),
  version: integer("version").notNull(),
});
