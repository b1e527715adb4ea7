/**
 * Config for the webhook ingress (`[webhooks]`, the interface's `webhooks` feature flag) and the
 * `[[jobs]]` handlers that consume its JobCalls. Owned by src/webhooks/.
 */
import { Type as T } from "@sinclair/typebox";

export const WebhookEndpoint = T.Object(
  {
    path: T.String({ pattern: "^/" }),
    job_id: T.Integer({ minimum: 0 }),
    auth: T.Union(
      [T.Literal("none"), T.Literal("bearer"), T.Literal("hmac-sha256"), T.Literal("api-key")],
      { default: "none" },
    ),
    secret: T.Optional(T.String()),
    api_key_header: T.Optional(T.String({ minLength: 1 })),
    name: T.Optional(T.String()),
    /** Header whose value identifies a delivery (e.g. X-GitHub-Delivery); redeliveries are folded. */
    dedupe_header: T.Optional(T.String({ minLength: 1 })),
  },
  { additionalProperties: false },
);

export const WebhooksSection = T.Object(
  {
    enabled: T.Boolean({ default: false }),
    /** A webhooks.toml in the Blueprint SDK webhook format; resolved beside the main config. */
    config: T.Optional(T.String()),
    bind_address: T.String({ default: "0.0.0.0:9090", pattern: "^.+:[0-9]{1,5}$" }),
    endpoints: T.Array(WebhookEndpoint, { default: [] }),
    max_body_bytes: T.Integer({ default: 1_048_576, minimum: 1 }),
    dedupe_window_s: T.Integer({ default: 86_400, minimum: 1 }),
    lease_ms: T.Integer({ default: 30_000, minimum: 100 }),
    max_attempts: T.Integer({ default: 5, minimum: 1 }),
    retain_done_hours: T.Integer({ default: 168, minimum: 1 }),
    /** Bearer token for the pull API of external runners; the pull API is off without it. */
    pull_token: T.Optional(T.String()),
  },
  { additionalProperties: false, default: {} },
);

export const JobHandler = T.Object(
  {
    job_id: T.Integer({ minimum: 0 }),
    command: T.Optional(T.Array(T.String(), { minItems: 1 })),
    forward: T.Optional(T.String({ pattern: "^https?://" })),
    timeout_ms: T.Integer({ default: 30_000, minimum: 1 }),
  },
  { additionalProperties: false },
);

export const JobsSection = T.Array(JobHandler, { default: [] });
