/** SpendAuth: the nonces seen (replay protection) and the payments to settle on chain. */
import { index, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";
import { now, int, serialId } from "./columns";

export const spendNonces = pgTable(
  "spend_nonces",
  {
    commitment: text("commitment").notNull(),
    nonce: text("nonce").notNull(),
    expiresAt: int("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.commitment, t.nonce] }), index("spend_nonces_expiry").on(t.expiresAt)],
);

export const settlements = pgTable(
  "settlements",
  {
    id: serialId("id"),
    commitment: text("commitment").notNull(),
    nonce: text("nonce").notNull(),
    amount: text("amount").notNull(),
    expiry: int("expiry").notNull(),
    authorization: text("authorization").notNull(),
    requestId: text("request_id"),
    state: text("state", { enum: ["pending", "authorized", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: int("attempts").notNull().default(0),
    nextAttemptAt: int("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    authHash: text("auth_hash"),
    txHash: text("tx_hash"),
    createdAt: int("created_at").notNull().default(now),
    updatedAt: int("updated_at"),
  },
  (t) => [index("settlements_state").on(t.state, t.nextAttemptAt), uniqueIndex("settlements_auth").on(t.commitment, t.nonce)],
);
