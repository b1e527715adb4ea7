/** What replicas sharing one database coordinate through: leases and change counters. */
import { pgTable, text } from "drizzle-orm/pg-core";
import { int } from "./columns";

export const leases = pgTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: int("expires_at").notNull(),
});

export const changeCounters = pgTable("change_counters", {
  name: text("name").primaryKey(),
  version: int("version").notNull(),
});
