/** Users, their sign-in (OAuth links, sessions, the first-run setup link) and their API keys. */
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";
import { now } from "./columns";

export const users = sqliteTable("users", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  email: text("email").notNull().unique(),
  passwordHash: text("password_hash"),
  isAdmin: integer("is_admin", { mode: "boolean" }).notNull().default(false),
  disabledAt: integer("disabled_at"),
  createdAt: integer("created_at").notNull().default(now),
  /**
   * Made by a password sign-up: the address was typed in, never proven (no mail is sent). OAuth,
   * setup and `user add --admin` never join such an account. Unproven unless a creator says
   * otherwise, so a row written without it (an older release) is never trusted by mistake.
   */
  emailUnverified: integer("email_unverified", { mode: "boolean" }).notNull().default(true),
});

export const oauthAccounts = sqliteTable(
  "oauth_accounts",
  {
    provider: text("provider").notNull(),
    providerUserId: text("provider_user_id").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id),
    createdAt: integer("created_at").notNull().default(now),
  },
  (t) => [primaryKey({ columns: [t.provider, t.providerUserId] })],
);

export const sessions = sqliteTable(
  "sessions",
  {
    tokenHash: text("token_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id),
    expiresAt: integer("expires_at").notNull(),
    createdAt: integer("created_at").notNull().default(now),
  },
  (t) => [index("sessions_user").on(t.userId)],
);

/** One-time links: first-run admin setup. */
export const setupTokens = sqliteTable("setup_tokens", {
  tokenHash: text("token_hash").primaryKey(),
  expiresAt: integer("expires_at").notNull(),
});

export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id),
    name: text("name").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    displayPrefix: text("display_prefix").notNull(),
    perMinute: integer("per_minute"),
    /** Key policy (../auth/key-policy.ts), each column null for none: model globs, comma-separated. */
    models: text("models"),
    /** Credits this key may spend per budget_period (`day|week|month` in UTC, or `total`), micro-credits. */
    budgetMicro: integer("budget_micro"),
    budgetPeriod: text("budget_period", { enum: ["day", "week", "month", "total"] }),
    tokensPerMinute: integer("tokens_per_minute"),
    /** Client addresses and CIDR blocks allowed to use the key, comma-separated, canonical. */
    allowIps: text("allow_ips"),
    createdAt: integer("created_at").notNull().default(now),
    expiresAt: integer("expires_at"),
    revokedAt: integer("revoked_at"),
    lastUsedAt: integer("last_used_at"),
  },
  (t) => [index("api_keys_user").on(t.userId)],
);
