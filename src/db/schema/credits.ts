/** Credits: each user's balance and the ledger of every change to it. */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { now } from "./columns";
import { users } from "./accounts";

export const balances = sqliteTable("balances", {
  userId: integer("user_id")
    .primaryKey()
    .references(() => users.id),
  micro: integer("micro").notNull().default(0),
});

export const ledger = sqliteTable(
  "ledger",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id),
    kind: text("kind", { enum: ["grant", "debit", "refund"] }).notNull(),
    micro: integer("micro").notNull(),
    requestId: text("request_id"),
    model: text("model"),
    note: text("note"),
    /** The API key a debit was spent with (a key's budget is the sum of its debits in a period). */
    keyId: text("key_id"),
    createdAt: integer("created_at").notNull().default(now),
  },
  (t) => [index("ledger_user_time").on(t.userId, t.createdAt), index("ledger_key_time").on(t.keyId, t.createdAt)],
);
