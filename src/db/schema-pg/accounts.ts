/** Users, their sign-in (OAuth links, sessions, the first-run setup link) and their API keys. */
import { boolean, index, pgTable, primaryKey, text } from "drizzle-orm/pg-core";
import { now, int, serialId } from "./columns";

export const users = pgTable("users", {
  id: serialId("id"),
  email: text("email").notNull().unique(),
  passwordHash: text("password_hash"),
  isAdmin: boolean("is_admin").notNull().default(false),
  disabledAt: int("disabled_at"),
  createdAt: int("created_at").notNull().default(now),
  emailUnverified: boolean("email_unverified").notNull().default(true),
});

export const oauthAccounts = pgTable(
  "oauth_accounts",
  {
    provider: text("provider").notNull(),
    providerUserId: text("provider_user_id").notNull(),
    userId: int("user_id")
      .notNull()
      .references(() => users.id),
    createdAt: int("created_at").notNull().default(now),
  },
  (t) => [primaryKey({ columns: [t.provider, t.providerUserId] })],
);

export const sessions = pgTable(
  "sessions",
  {
    tokenHash: text("token_hash").primaryKey(),
    userId: int("user_id")
      .notNull()
      .references(() => users.id),
    expiresAt: int("expires_at").notNull(),
    createdAt: int("created_at").notNull().default(now),
  },
  (t) => [index("sessions_user").on(t.userId)],
);

export const setupTokens = pgTable("setup_tokens", {
  tokenHash: text("token_hash").primaryKey(),
  expiresAt: int("expires_at").notNull(),
});

export const apiKeys = pgTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    userId: int("user_id")
      .notNull()
      .references(() => users.id),
    name: text("name").notNull(),
    keyHash: text("key_hash").notNull().unique(),
    displayPrefix: text("display_prefix").notNull(),
    perMinute: int("per_minute"),
    models: text("models"),
    budgetMicro: int("budget_micro"),
    budgetPeriod: text("budget_period", { enum: ["day", "week", "month", "total"] }),
    tokensPerMinute: int("tokens_per_minute"),
    allowIps: text("allow_ips"),
    createdAt: int("created_at").notNull().default(now),
    expiresAt: int("expires_at"),
    revokedAt: int("revoked_at"),
    lastUsedAt: int("last_used_at"),
  },
  (t) => [index("api_keys_user").on(t.userId)],
);
