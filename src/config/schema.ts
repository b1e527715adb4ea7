/**
 * The configuration schema: every key optional, every default named here, in ./limits-schema.ts
 * (`[limits]`) or in ./webhooks-schema.ts (`[webhooks]`, `[[jobs]]`), and in docs/configuration.md.
 * The TypeScript type of the whole config is derived from this schema, so code never reads a
 * key the schema does not know. validate.ts applies it; checks.ts checks what it cannot say.
 */
import { Type as T, type Static } from "@sinclair/typebox";
import { WebhooksSection, JobsSection } from "./webhooks-schema";
import { MAX_TIMER_MS } from "./timer-limit";
import { ETH_ADDRESS, HTTP_URL, HTTP_URL_PATTERN } from "./patterns";
import { Limits } from "./limits-schema";

const Server = T.Object(
  {
    listen: T.String({ default: "0.0.0.0:8080" }),
    public_url: T.String({ default: "http://localhost:8080", ...HTTP_URL_PATTERN }),
    data_dir: T.String({ default: "./data", minLength: 1 }),
    max_body_bytes: T.Integer({ default: 10_485_760, minimum: 1024 }),
    /** Chat bodies being read at once may declare at most this many bytes together (503 past it). */
    max_body_bytes_in_flight: T.Integer({ default: 268_435_456, minimum: 1024 }),
    trusted_proxies: T.Array(T.String(), { default: [] }),
    /** Origins whose pages may call the API from a browser (CORS), or ["*"]; none by default. */
    cors_origins: T.Array(T.String(), { default: [] }),
    shutdown_grace_ms: T.Integer({ default: 10_000, minimum: 0, maximum: MAX_TIMER_MS }),
    /** Rows of the request log (the dashboard's usage history) older than this are pruned. */
    request_log_days: T.Integer({ default: 90, minimum: 1 }),
    /** /v1/responses answers kept for previous_response_id and GET /v1/responses/{id} are pruned after this. */
    response_store_days: T.Integer({ default: 30, minimum: 1 }),
    /** The most one stored response may hold (its conversation and output, as JSON); a larger one is not kept. */
    response_store_max_bytes: T.Integer({ default: 10_485_760, minimum: 1024 }),
  },
  { additionalProperties: false, default: {} },
);

const Upstream = T.Object(
  {
    name: T.String({ minLength: 1 }),
    base_url: HTTP_URL,
    api_key: T.Optional(T.String()),
    /** How api_key is sent: `Authorization: Bearer` (OpenAI and most servers), or `x-api-key` as Anthropic's own API takes it. */
    api_key_header: T.Union([T.Literal("authorization"), T.Literal("x-api-key")], { default: "authorization" }),
    discover: T.Boolean({ default: false }),
    /** Routes imported by `discover` are free-tier when true. */
    discover_free: T.Boolean({ default: false }),
    discover_interval_s: T.Integer({ default: 60, minimum: 5, maximum: Math.floor(MAX_TIMER_MS / 1000) }),
    connect_timeout_ms: T.Integer({ default: 5_000, minimum: 1, maximum: MAX_TIMER_MS }),
    first_byte_timeout_ms: T.Integer({ default: 120_000, minimum: 1, maximum: MAX_TIMER_MS }),
    idle_timeout_ms: T.Integer({ default: 60_000, minimum: 1, maximum: MAX_TIMER_MS }),
    /**
     * The longest a streamed answer may take, from its headers to its end, however steadily it
     * trickles: an upstream that drips bytes or keep-alive comments would otherwise hold the
     * request, its connection and its reservation for ever. 30 minutes: 9,000 tokens at 5 a second.
     */
    stream_timeout_ms: T.Integer({ default: 1_800_000, minimum: 1, maximum: MAX_TIMER_MS }),
    /**
     * Most connections the gateway's own client (plain-http upstreams) keeps open to the upstream
     * at once; requests past it wait for one, within first_byte_timeout_ms. 64: more than a model
     * server on one box works on at once (Ollama and llama.cpp a few, vLLM queues past its batch),
     * so a burst waits in the gateway rather than as a thousand sockets at the model server.
     */
    max_connections: T.Integer({ default: 64, minimum: 1, maximum: 10_000 }),
    /** The one field a priced request's completion limit goes in to this upstream; "none" adds nothing. */
    token_limit_field: T.Union([T.Literal("max_tokens"), T.Literal("max_completion_tokens"), T.Literal("none")], { default: "max_tokens" }),
    /** How a chat message of role `developer` is sent: as `system` (servers that know only that), or as it came. */
    developer_role: T.Union([T.Literal("system"), T.Literal("developer")], { default: "system" }),
    /**
     * The APIs this upstream serves itself beside chat completions: its targets get /v1/messages
     * or /v1/responses passed through as they came; otherwise the gateway translates them to chat.
     */
    native: T.Array(T.Union([T.Literal("messages"), T.Literal("responses")]), { default: [], uniqueItems: true }),
  },
  { additionalProperties: false },
);

const Target = T.Object(
  {
    upstream: T.String({ minLength: 1 }),
    model: T.Optional(T.String({ minLength: 1 })),
    weight: T.Integer({ default: 1, minimum: 0 }),
  },
  { additionalProperties: false },
);

/**
 * Credits per 1M tokens. At most a credit a token, so that a request's cost (at most
 * MAX_COUNTED_TOKENS of each kind, src/credits/cost.ts) stays an exact integer of micro-credits.
 */
const Price = T.Object(
  {
    prompt: T.Number({ default: 0, minimum: 0, maximum: 1_000_000 }),
    completion: T.Number({ default: 0, minimum: 0, maximum: 1_000_000 }),
    /** Credits per call, for endpoints that report no tokens (audio). */
    request: T.Number({ default: 0, minimum: 0, maximum: 1_000_000 }),
  },
  { additionalProperties: false, default: {} },
);

/** The endpoints a model route may serve (`endpoints = [...]` narrows them; all by default). */
export const ENDPOINT_NAMES = ["chat", "completions", "embeddings", "rerank", "transcriptions", "translations", "speech", "messages", "responses"] as const;
export type EndpointName = (typeof ENDPOINT_NAMES)[number];

const Model = T.Object(
  {
    id: T.String({ minLength: 1 }),
    targets: T.Array(Target, { minItems: 1 }),
    strategy: T.Union([T.Literal("failover"), T.Literal("weighted"), T.Literal("least-latency")], {
      default: "failover",
    }),
    free: T.Boolean({ default: false }),
    price: Price,
    aliases: T.Array(T.String({ minLength: 1 }), { default: [] }),
    endpoints: T.Array(T.Union(ENDPOINT_NAMES.map((name) => T.Literal(name))), { default: [...ENDPOINT_NAMES], minItems: 1 }),
  },
  { additionalProperties: false },
);

const Routing = T.Object(
  {
    max_attempts: T.Integer({ default: 3, minimum: 1 }),
    retry_backoff_ms: T.Integer({ default: 50, minimum: 0, maximum: MAX_TIMER_MS }),
    cooldown_failures: T.Integer({ default: 3, minimum: 1 }),
    cooldown_ms: T.Integer({ default: 30_000, minimum: 0, maximum: MAX_TIMER_MS }),
    /** Upper bound of completion tokens assumed when a request sets no max_tokens. */
    default_max_tokens: T.Integer({ default: 4096, minimum: 1 }),
  },
  { additionalProperties: false, default: {} },
);

const OAuthProvider = T.Object(
  {
    client_id: T.String({ minLength: 1 }),
    client_secret: T.String({ minLength: 1 }),
    /** Override of the provider's endpoints (self-hosted GitHub Enterprise, tests). */
    authorize_url: T.Optional(T.String()),
    token_url: T.Optional(T.String()),
    api_url: T.Optional(T.String()),
  },
  { additionalProperties: false },
);

const Auth = T.Object(
  {
    signup: T.Union([T.Literal("closed"), T.Literal("open"), T.Literal("domain")], {
      default: "closed",
    }),
    allowed_domains: T.Array(T.String(), { default: [] }),
    session_days: T.Integer({ default: 30, minimum: 1, maximum: 400 }), // 400: the session cookie's lifetime
    github: T.Optional(OAuthProvider),
    google: T.Optional(OAuthProvider),
  },
  { additionalProperties: false, default: {} },
);

const SpendAuth = T.Object(
  {
    chain_id: T.Integer({ default: 3799, minimum: 1 }),
    verifying_contract: T.Optional(ETH_ADDRESS),
    operator: T.Optional(ETH_ADDRESS),
    service_id: T.Integer({ default: 1, minimum: 0 }),
    rpc_url: T.Optional(HTTP_URL),
    allowed_signers: T.Array(ETH_ADDRESS, { default: [] }),
    operator_key: T.Optional(T.String()),
    /** Credits to wei-like units: amount units charged per 1 credit of a model's price. */
    units_per_credit: T.String({ default: "1000000", pattern: "^[0-9]+$", expected: "a whole number written in quotes (digits only)" }),
    /** Authorizations expiring further in the future are refused (bounds the replay table). */
    max_expiry_s: T.Integer({ default: 86_400, minimum: 60 }),
    /** How long an on-chain getAccount answer is reused. */
    account_cache_ms: T.Integer({ default: 2_000, minimum: 0, maximum: MAX_TIMER_MS }),
    rpc_timeout_ms: T.Integer({ default: 5_000, minimum: 100, maximum: MAX_TIMER_MS }),
    /** Settlement worker: how often it looks for work, and attempts before a settlement is dead. */
    settle_interval_ms: T.Integer({ default: 2_000, minimum: 10, maximum: MAX_TIMER_MS }),
    settle_max_attempts: T.Integer({ default: 8, minimum: 1 }),
  },
  { additionalProperties: false, default: {} },
);

const Metrics = T.Object(
  {
    enabled: T.Boolean({ default: true }),
    // An empty token would leave /metrics open while config check shows it redacted.
    token: T.Optional(T.String({ minLength: 1 })),
  },
  { additionalProperties: false, default: {} },
);

/**
 * `[cluster]`: what one process holds in memory, held in Redis instead, for replicas behind a load
 * balancer. Without `redis_url` everything stays in this process's memory.
 */
const Cluster = T.Object(
  {
    redis_url: T.Optional(T.String({ pattern: "^(redis|rediss|valkey|valkeys)://", expected: "a redis://, rediss://, valkey:// or valkeys:// URL" })),
    /** How long a Redis command may take before the request it serves is refused (503). */
    redis_timeout_ms: T.Integer({ default: 1_000, minimum: 10, maximum: MAX_TIMER_MS }),
  },
  { additionalProperties: false, default: {} },
);

/**
 * `[database]`: where the tables live. Without `url`, SQLite in server.data_dir. With a Postgres
 * `url`, serve and every command use that database (docs/scaling.md); `pool_size` is each
 * server's number of connections to it (a CLI command opens two).
 */
const DatabaseSection = T.Object(
  {
    url: T.Optional(T.String({ pattern: "^postgres(ql)?://" })),
    pool_size: T.Integer({ default: 10, minimum: 1, maximum: 1_000 }),
  },
  { additionalProperties: false, default: {} },
);

const Log = T.Object(
  {
    level: T.Union([T.Literal("debug"), T.Literal("info"), T.Literal("warn"), T.Literal("error")], {
      default: "info",
    }),
    requests: T.Boolean({ default: true }),
  },
  { additionalProperties: false, default: {} },
);

export const ConfigSchema = T.Object(
  {
    server: Server,
    limits: Limits,
    upstreams: T.Array(Upstream, { default: [] }),
    models: T.Array(Model, { default: [] }),
    routing: Routing,
    auth: Auth,
    spend_auth: SpendAuth,
    metrics: Metrics,
    cluster: Cluster,
    database: DatabaseSection,
    log: Log,
    webhooks: WebhooksSection,
    jobs: JobsSection,
  },
  { additionalProperties: false },
);

export type Config = Static<typeof ConfigSchema>;
export type UpstreamConfig = Static<typeof Upstream>;
export type ModelConfig = Static<typeof Model>;

/** Keys whose values are secrets wherever they appear; `config check` prints them redacted. */
export const SECRET_KEYS = new Set(["api_key", "secret", "client_secret", "operator_key", "token", "pull_token", "redis_url"]);

/** Secrets by their whole path, where the key's name alone (`url`) is a secret elsewhere only in part. */
export const SECRET_PATHS = new Set(["database.url"]);
