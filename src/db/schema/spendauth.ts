/** SpendAuth: the nonces seen (replay protection) and the payments to settle on chain. */
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";
import { now } from "./columns";

/** SpendAuth replay protection: (commitment, nonce) seen, kept at least until expiry. */
export const spendNonces = sqliteTable(
  "spend_nonces",
  {
    commitment: text("commitment").notNull(),
    nonce: text("nonce").notNull(),
    /** Unix ms after which the record may be pruned (expiry plus the skew allowance). */
    expiresAt: integer("expires_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.commitment, t.nonce] }), index("spend_nonces_expiry").on(t.expiresAt)],
);

/**
 * Served SpendAuth authorizations, claimed on-chain by the settlement worker: pending ->
 * authorized (authorizeSpend mined) -> done (claimPayment mined), or dead. Amounts are uint256
 * decimal strings; expiry is the authorization's, in Unix seconds.
 */
export const settlements = sqliteTable(
  "settlements",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    commitment: text("commitment").notNull(),
    nonce: text("nonce").notNull(),
    amount: text("amount").notNull(),
    expiry: integer("expiry").notNull(),
    authorization: text("authorization").notNull(),
    requestId: text("request_id"),
    state: text("state", { enum: ["pending", "authorized", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    authHash: text("auth_hash"),
    txHash: text("tx_hash"),
    createdAt: integer("created_at").notNull().default(now),
    updatedAt: integer("updated_at"),
  },
  (t) => [index("settlements_state").on(t.state, t.nextAttemptAt), uniqueIndex("settlements_auth").on(t.commitment, t.nonce)],
);
