/**
 * Config for the webhook ingress (`[webhooks]`, the interface's `webhooks` feature flag) and the
 * `[[jobs]]` handlers that consume its JobCalls. Owned by src/webhooks/. The endpoint keys are
 * those of the Blueprint SDK webhook crate, so its webhooks.toml loads unchanged; what a schema
 * cannot say (duplicate or reserved paths, a secret the auth mode needs, one action per job) is
 * checked in src/webhooks/config.ts after this schema passes.
 */
import { Type as T, type Static } from "@sinclair/typebox";
import { MAX_TIMER_MS } from "./timer-limit";
import { HTTP_URL } from "./patterns";

const AUTH_MODES = ["none", "bearer", "hmac-sha256", "api-key", "standard-webhooks"] as const;

const WebhookEndpoint = T.Object(
  {
    /** Starts with "/", as a request can carry it: checked in src/webhooks/config.ts. */
    path: T.String(),
    job_id: T.Integer({ minimum: 0 }),
    auth: T.Union(
      AUTH_MODES.map((mode) => T.Literal(mode)),
      { default: "none" },
    ),
    secret: T.Optional(T.String()),
    api_key_header: T.Optional(T.String({ minLength: 1 })),
    name: T.Optional(T.String()),
    /** Header whose value identifies a delivery (e.g. X-GitHub-Delivery); redeliveries are folded. */
    dedupe_header: T.Optional(T.String({ minLength: 1 })),
    /** standard-webhooks only: how far webhook-timestamp may be from this clock, either way (default 300). */
    tolerance_s: T.Optional(T.Integer({ minimum: 1, maximum: 86_400 })),
  },
  { additionalProperties: false },
);

export const WebhooksSection = T.Object(
  {
    enabled: T.Boolean({ default: false }),
    /** A webhooks.toml in the Blueprint SDK webhook format; resolved beside the main config. */
    config: T.Optional(T.String()),
    bind_address: T.String({ default: "0.0.0.0:9090" }),
    endpoints: T.Array(WebhookEndpoint, { default: [] }),
    max_body_bytes: T.Integer({ default: 1_048_576, minimum: 1 }),
    /** Bytes of bodies over 64 KiB being read at once, counted as they arrive; past it 503 with Retry-After. */
    max_body_bytes_in_flight: T.Integer({ default: 67_108_864, minimum: 1 }),
    /** The most body bytes undelivered calls may hold; past it a verified request gets 503 with Retry-After. */
    max_pending_bytes: T.Integer({ default: 1_073_741_824, minimum: 1 }),
    dedupe_window_s: T.Integer({ default: 86_400, minimum: 1 }),
    lease_ms: T.Integer({ default: 30_000, minimum: 100, maximum: MAX_TIMER_MS }),
    max_attempts: T.Integer({ default: 5, minimum: 1 }),
    /** Delay before the second attempt; doubles per attempt up to backoff_max_ms. */
    backoff_ms: T.Integer({ default: 1_000, minimum: 0, maximum: MAX_TIMER_MS }),
    backoff_max_ms: T.Integer({ default: 300_000, minimum: 0, maximum: MAX_TIMER_MS }),
    retain_done_hours: T.Integer({ default: 168, minimum: 1 }),
    /** Retry-After (seconds) sent with a 503 when the outbox cannot be written. */
    retry_after_s: T.Integer({ default: 5, minimum: 1 }),
    /** Bearer token for the pull API of external runners; the pull API is off without it. */
    pull_token: T.Optional(T.String({ minLength: 1 })),
  },
  {
    additionalProperties: false,
    default: {},
    misplaced: { service_id: "set at run time with --service-id or $MODELGATE_SERVICE_ID, not in TOML" },
  },
);

const NOTIFIER_KINDS = ["slack", "discord", "ntfy", "gotify", "matrix", "webhook"] as const;

/** Where a triaged alert is sent; which keys each kind needs is checked in src/webhooks/config.ts. */
const Notifier = T.Object(
  {
    kind: T.Union(NOTIFIER_KINDS.map((kind) => T.Literal(kind))),
    /** slack, discord, webhook: the webhook URL; ntfy: the topic's URL; gotify: the server's base URL. */
    url: T.Optional(HTTP_URL),
    /** gotify: an application token; matrix: an access token; ntfy: an access token (optional). */
    token: T.Optional(T.String({ minLength: 1 })),
    /** matrix: the homeserver's base URL and the room id (`!abc:example.org`). */
    homeserver: T.Optional(HTTP_URL),
    room: T.Optional(T.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

/** A `triage` job: the alert read, summarised by a model, and sent to the job's `notify` targets. */
const Triage = T.Object(
  {
    /** A model route id or alias, called in-process as `as_user` (or the built-in service identity, free models only). */
    model: T.String({ minLength: 1 }),
    as_user: T.Optional(T.String({ minLength: 1 })),
    /** The prompt template: text, or `file:PATH` (relative to the config file); built-in per kind when absent. */
    prompt: T.Optional(T.String({ minLength: 1 })),
    /** How long the model may take (retries included) before the alert goes out without a summary. */
    wait_ms: T.Integer({ default: 30_000, minimum: 1, maximum: MAX_TIMER_MS }),
    max_tokens: T.Integer({ default: 400, minimum: 1 }),
    /** More alert groups than this in a minute on one endpoint are held for one digest. */
    storm_per_minute: T.Integer({ default: 20, minimum: 1 }),
    /** How long a digest collects held alerts before it is sent. */
    digest_window_s: T.Integer({ default: 60, minimum: 1, maximum: 86_400 }),
    /** Attempts per notifier delivery before it is dead-lettered (backoff as webhooks.backoff_ms). */
    delivery_attempts: T.Integer({ default: 8, minimum: 1 }),
  },
  { additionalProperties: false },
);

const JobHandler = T.Object(
  {
    job_id: T.Integer({ minimum: 0 }),
    command: T.Optional(T.Array(T.String(), { minItems: 1 })),
    forward: T.Optional(HTTP_URL),
    triage: T.Optional(Triage),
    /** At least one target for a triage job: said by src/webhooks/triage/config.ts, with an example. */
    notify: T.Optional(T.Array(Notifier)),
    timeout_ms: T.Integer({ default: 30_000, minimum: 1, maximum: MAX_TIMER_MS }),
    /** How many calls of this job run at once. */
    concurrency: T.Integer({ default: 1, minimum: 1, maximum: 256 }),
  },
  { additionalProperties: false },
);

export const JobsSection = T.Array(JobHandler, { default: [] });

export type WebhooksConfig = Static<typeof WebhooksSection>;
export type WebhookEndpointConfig = Static<typeof WebhookEndpoint>;
export type JobHandlerConfig = Static<typeof JobHandler>;
export type TriageConfig = Static<typeof Triage>;
export type NotifierConfig = Static<typeof Notifier>;
export type NotifierKind = (typeof NOTIFIER_KINDS)[number];
