/** Credits: each user's balance and the ledger of every change to it. */
import { index, pgTable, text } from "drizzle-orm/pg-core";
import { now, int, serialId } from "./columns";
import { users } from "./accounts";

export const balances = pgTable("balances", {
  userId: int("user_id")
    .primaryKey()
    .references(() => users.id),
  micro: int("micro").notNull().default(0),
});

export const ledger = pgTable(
  "ledger",
  {
    id: serialId("id"),
    userId: int("user_id")
      .notNull()
      .references(() => users.id),
    kind: text("kind", { enum: ["grant", "debit", "refund"] }).notNull(),
    micro: int("micro").notNull(),
    requestId: text("request_id"),
    model: text("model"),
    note: text("note"),
    keyId: text("key_id"),
    createdAt: int("created_at").notNull().default(now),
  },
  (t) => [index("ledger_user_time").on(t.userId, t.createdAt), index("ledger_key_time").on(t.keyId, t.createdAt)],
);
