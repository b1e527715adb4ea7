/**
 * The tables of src/db/schema.ts for Postgres (`[database] url`). The two files describe the same
 * tables, column for column, index for index; tests/db/schema-pg.test.ts fails when they differ.
 * Types map one to one: SQLite's integer is bigint here (milliseconds and micro-credits outgrow
 * 32 bits), its boolean integer is boolean, its blob is bytea, AUTOINCREMENT is an identity
 * column (a sequence, so a call_id is never reused).
 * After editing, run `make migrations NAME=…` (regenerates drizzle/pg/ and the embedded copy).
 */
import { sql } from "drizzle-orm";
import { bigint, boolean, customType, index, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";

const now = sql`((extract(epoch from clock_timestamp()) * 1000)::bigint)`;

/** A 64-bit integer read back as a JavaScript number (every value modelgate keeps fits in 2^53). */
function int(name: string) {
  return bigint(name, { mode: "number" });
}

function serialId(name: string) {
  return int(name).primaryKey().generatedByDefaultAsIdentity();
}

const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => "bytea",
});

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

export const requestLog = pgTable(
  "request_log",
  {
    id: serialId("id"),
    requestId: text("request_id").notNull(),
    createdAt: int("created_at").notNull(),
    identity: text("identity").notNull(),
    userId: int("user_id"),
    keyId: text("key_id"),
    model: text("model").notNull(),
    endpoint: text("endpoint").notNull().default("chat"),
    upstream: text("upstream"),
    status: int("status").notNull(),
    promptTokens: int("prompt_tokens").notNull().default(0),
    completionTokens: int("completion_tokens").notNull().default(0),
    costMicro: int("cost_micro").notNull().default(0),
    latencyMs: int("latency_ms").notNull().default(0),
  },
  (t) => [index("request_log_user_time").on(t.userId, t.createdAt), index("request_log_time").on(t.createdAt)],
);

export const storedResponses = pgTable(
  "stored_responses",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    createdAt: int("created_at").notNull(),
    items: text("items").notNull(),
    response: text("response").notNull(),
  },
  (t) => [index("stored_responses_time").on(t.createdAt)],
);

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

/** call_id comes from the identity column's sequence: never reused, unique across replicas. */
export const webhookJobs = pgTable(
  "webhook_jobs",
  {
    callId: serialId("call_id"),
    jobId: int("job_id").notNull(),
    serviceId: int("service_id").notNull(),
    path: text("path").notNull(),
    name: text("name"),
    body: bytea("body").notNull(),
    contentType: text("content_type"),
    headers: text("headers"),
    dedupeKey: text("dedupe_key").unique(),
    state: text("state", { enum: ["pending", "leased", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: int("attempts").notNull().default(0),
    attemptBase: int("attempt_base").notNull().default(0),
    leaseUntil: int("lease_until"),
    nextAttemptAt: int("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    createdAt: int("created_at").notNull(),
    doneAt: int("done_at"),
  },
  (t) => [index("webhook_jobs_ready").on(t.state, t.nextAttemptAt), index("webhook_jobs_lease").on(t.state, t.leaseUntil)],
);

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

export const triageAlerts = pgTable(
  "triage_alerts",
  {
    id: serialId("id"),
    callId: int("call_id").unique(),
    jobId: int("job_id").notNull(),
    path: text("path").notNull(),
    kind: text("kind").notNull(),
    status: text("status").notNull(),
    groupKey: text("group_key"),
    dedupeKey: text("dedupe_key"),
    title: text("title").notNull(),
    severity: text("severity"),
    details: text("details").notNull().default(""),
    alertCount: int("alert_count").notNull().default(0),
    state: text("state").notNull(),
    summary: text("summary"),
    summaryError: text("summary_error"),
    refersTo: int("refers_to"),
    digestId: int("digest_id"),
    createdAt: int("created_at").notNull(),
    dueAt: int("due_at"),
  },
  (t) => [index("triage_alerts_group").on(t.jobId, t.groupKey, t.id), index("triage_alerts_path_time").on(t.path, t.createdAt)],
);

export const triageDeliveries = pgTable(
  "triage_deliveries",
  {
    alertId: int("alert_id").notNull(),
    target: int("target").notNull(),
    kind: text("kind").notNull(),
    state: text("state", { enum: ["pending", "sent", "dead"] })
      .notNull()
      .default("pending"),
    attempts: int("attempts").notNull().default(0),
    nextAttemptAt: int("next_attempt_at").notNull(),
    lastError: text("last_error"),
    sentAt: int("sent_at"),
    remoteId: text("remote_id"),
  },
  (t) => [primaryKey({ columns: [t.alertId, t.target] }), index("triage_deliveries_due").on(t.state, t.nextAttemptAt)],
);

export const leases = pgTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  expiresAt: int("expires_at").notNull(),
});

export const changeCounters = pgTable("change_counters", {
  name: text("name").primaryKey(),
  version: int("version").notNull(),
});
