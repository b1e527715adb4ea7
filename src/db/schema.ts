/**
 * Every table modelgate keeps. Times are integer milliseconds since the epoch; money is integer
 * micro-credits (1 credit = 1,000,000). Secrets are never stored, only their SHA-256 (hex).
 * After editing, run `make migrations` (regenerates drizzle/ and the embedded copy).
 */
import { sql } from "drizzle-orm";
import { blob, index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

const now = sql`(CAST(unixepoch('subsec') * 1000 AS INTEGER))`;

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

/** One row per /v1/chat/completions request, written behind in batches. */
export const requestLog = sqliteTable(
  "request_log",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    requestId: text("request_id").notNull(),
    createdAt: integer("created_at").notNull(),
    identity: text("identity").notNull(),
    userId: integer("user_id"),
    keyId: text("key_id"),
    model: text("model").notNull(),
    /** The endpoint called (`chat`, `embeddings`, … as the metrics label names it; "" when refused before it was known). */
    endpoint: text("endpoint").notNull().default("chat"),
    upstream: text("upstream"),
    status: integer("status").notNull(),
    promptTokens: integer("prompt_tokens").notNull().default(0),
    completionTokens: integer("completion_tokens").notNull().default(0),
    costMicro: integer("cost_micro").notNull().default(0),
    latencyMs: integer("latency_ms").notNull().default(0),
  },
  (t) => [index("request_log_user_time").on(t.userId, t.createdAt), index("request_log_time").on(t.createdAt)],
);

/**
 * /v1/responses answers kept for previous_response_id and GET /v1/responses/{id} (src/router/response-store.ts):
 * whose they are (`owner`: "user:ID" or "spend:COMMITMENT"), the conversation as Responses input
 * items (what came before, this request's input, the output), and the Response object as sent.
 * Pruned after server.response_store_days.
 */
export const storedResponses = sqliteTable(
  "stored_responses",
  {
    id: text("id").primaryKey(),
    owner: text("owner").notNull(),
    createdAt: integer("created_at").notNull(),
    items: text("items").notNull(),
    response: text("response").notNull(),
  },
  (t) => [index("stored_responses_time").on(t.createdAt)],
);

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

/**
 * The webhook outbox: one row per accepted JobCall; call_id is the row id (AUTOINCREMENT, so it
 * is never reused, even after done rows are pruned). The body is the request's raw bytes.
 * A row is `leased` to one consumer until lease_until; `attempts` counts deliveries, across
 * retries too, and fences late acks from a consumer whose lease was taken over; `attempt_base` is
 * what it was at the last `jobs retry` (max_attempts bounds the deliveries since). Written by
 * src/webhooks/.
 */
export const webhookJobs = sqliteTable(
  "webhook_jobs",
  {
    callId: integer("call_id").primaryKey({ autoIncrement: true }),
    jobId: integer("job_id").notNull(),
    serviceId: integer("service_id").notNull(),
    path: text("path").notNull(),
    name: text("name"),
    body: blob("body", { mode: "buffer" }).notNull(),
    contentType: text("content_type"),
    /** The request headers a handler may need (src/webhooks/headers.ts: a fixed allowlist, bounded), as a JSON object; null when none was sent. */
    headers: text("headers"),
    /** `path NUL delivery-id` while inside the dedupe window; cleared when a later delivery reuses it. */
    dedupeKey: text("dedupe_key").unique(),
    state: text("state", { enum: ["pending", "leased", "done", "dead"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    attemptBase: integer("attempt_base").notNull().default(0),
    leaseUntil: integer("lease_until"),
    nextAttemptAt: integer("next_attempt_at").notNull().default(0),
    lastError: text("last_error"),
    createdAt: integer("created_at").notNull(),
    doneAt: integer("done_at"),
  },
  (t) => [index("webhook_jobs_ready").on(t.state, t.nextAttemptAt), index("webhook_jobs_lease").on(t.state, t.leaseUntil)],
);

/**
 * The routes discovery imported, per upstream, so that after a restart they are served at once,
 * before the upstream answers discovery again. A poll's list replaces its upstream's rows (one
 * the upstream no longer lists is dropped); rows of an upstream the config no longer discovers
 * are never read. Written by src/router/remembered-routes.ts.
 */
export const discoveredRoutes = sqliteTable(
  "discovered_routes",
  {
    upstream: text("upstream").notNull(),
    model: text("model").notNull(),
    /** Its place in the upstream's list, so a restart keeps the order the upstream gave. */
    position: integer("position").notNull(),
    seenAt: integer("seen_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.upstream, t.model] })],
);

/**
 * One row per alert a `triage` job read (and one per storm digest, with no call): what it was,
 * what became of it (`state`), and the model's summary or why there is none. The summary is kept
 * before any delivery is made, so a redelivered call never asks the model twice. Written by
 * src/webhooks/triage/.
 */
export const triageAlerts = sqliteTable(
  "triage_alerts",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    /** The webhook call it was read from; null for a digest. */
    callId: integer("call_id").unique(),
    jobId: integer("job_id").notNull(),
    path: text("path").notNull(),
    kind: text("kind").notNull(),
    status: text("status").notNull(),
    groupKey: text("group_key"),
    dedupeKey: text("dedupe_key"),
    title: text("title").notNull(),
    severity: text("severity"),
    /** One line per alert of the group, for the message when there is no summary. */
    details: text("details").notNull().default(""),
    alertCount: integer("alert_count").notNull().default(0),
    /** triaging (the model not yet asked or answered), summarised, unsummarised, duplicate, held (in a digest), digest. */
    state: text("state").notNull(),
    summary: text("summary"),
    summaryError: text("summary_error"),
    /** A resolved group's firing row. */
    refersTo: integer("refers_to"),
    /** A held alert's digest row. */
    digestId: integer("digest_id"),
    createdAt: integer("created_at").notNull(),
    /** A digest: when it closes and is sent. */
    dueAt: integer("due_at"),
  },
  (t) => [index("triage_alerts_group").on(t.jobId, t.groupKey, t.id), index("triage_alerts_path_time").on(t.path, t.createdAt)],
);

/** One row per alert and notify target: that target's delivery, retried and dead-lettered on its own. */
export const triageDeliveries = sqliteTable(
  "triage_deliveries",
  {
    alertId: integer("alert_id").notNull(),
    /** The target's place in the job's `notify` list. */
    target: integer("target").notNull(),
    kind: text("kind").notNull(),
    state: text("state", { enum: ["pending", "sent", "dead"] })
      .notNull()
      .default("pending"),
    attempts: integer("attempts").notNull().default(0),
    nextAttemptAt: integer("next_attempt_at").notNull(),
    lastError: text("last_error"),
    sentAt: integer("sent_at"),
    /** What the service called the message (a Matrix event id), for a later reply to it. */
    remoteId: text("remote_id"),
  },
  (t) => [primaryKey({ columns: [t.alertId, t.target] }), index("triage_deliveries_due").on(t.state, t.nextAttemptAt)],
);

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
