/**
 * Per-endpoint request verification: the interface's four modes and Standard Webhooks.
 * - none: accepts any request;
 * - bearer: `Authorization: Bearer <secret>`;
 * - hmac-sha256: hex HMAC-SHA256 of the raw body under `secret`, optionally prefixed `sha256=`,
 *   from the first present of X-Signature-256, X-Hub-Signature-256, X-Webhook-Signature;
 * - api-key: the secret in `X-API-Key` or the header named by `api_key_header`;
 * - standard-webhooks: webhook-id, webhook-timestamp and webhook-signature under a `whsec_`
 *   secret, within `tolerance_s`, and de-duplicated on webhook-id (./standard-webhooks.ts).
 * Every comparison is constant-time (equalSecrets): tokens are compared as SHA-256 digests (so
 * neither content nor length leaks), HMACs as lowercase hex. Denials are values, never
 * exceptions: the reason for the log, which names what was wrong and never a secret.
 */
import { createHmac } from "node:crypto";
import type { WebhookEndpointConfig } from "../config/webhooks-schema";
import { bearerToken, equalSecrets, sha256Hex } from "../auth/tokens";
import { DEFAULT_TOLERANCE_S, ID_HEADER, standardWebhooksKey, standardWebhooksRefusal } from "./standard-webhooks";

const SIGNATURE_HEADERS = ["x-signature-256", "x-hub-signature-256", "x-webhook-signature"] as const;
const HEX_64 = /^[0-9a-fA-F]{64}$/;

export interface Verifier {
  /** Whether the decision needs the body (a signature over it), not the headers alone. */
  readonly needsBody: boolean;
  /**
   * Why the request is refused, or null when it passes. With `body` null it decides what the
   * headers alone can (a missing header, a stale timestamp), so that is refused before any body is read.
   */
  refusal(headers: Headers, body: Uint8Array | null): string | null;
}

/** `what` names the token in a refusal's reason ("bearer token", "X-API-Key header"). */
function tokenVerifier(secret: string, what: string, read: (headers: Headers) => string | null): Verifier {
  const expected = sha256Hex(secret);
  return {
    needsBody: false,
    refusal(headers) {
      const presented = read(headers);
      if (presented === null) return `no ${what}`;
      return equalSecrets(sha256Hex(presented), expected) ? null : `wrong ${what}`;
    },
  };
}

/** HMAC-SHA256 of `body` under `secret`, as lowercase hex (also used by tests and the bench). */
export function signBody(secret: string, body: Uint8Array | string): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

function verifySignature(secret: string, header: string | null, body: Uint8Array): boolean {
  if (header === null) return false;
  const hex = header.trim().replace(/^sha256=/i, "");
  if (!HEX_64.test(hex)) return false;
  return equalSecrets(hex.toLowerCase(), signBody(secret, body));
}

function firstSignatureHeader(headers: Headers): string | null {
  for (const name of SIGNATURE_HEADERS) {
    const value = headers.get(name);
    if (value !== null) return value;
  }
  return null;
}

export interface VerifierOptions {
  /** The clock Standard Webhooks timestamps are checked against (the outbox's). */
  now: () => number;
}

function hmacRefusal(secret: string, headers: Headers, body: Uint8Array | null): string | null {
  const header = firstSignatureHeader(headers);
  if (header === null) return `no ${SIGNATURE_HEADERS.join(", ")} header`;
  if (body === null) return null;
  return verifySignature(secret, header, body) ? null : "the signature does not match the body";
}

/** Builds the verifier once per endpoint at start-up (config has validated the secret). */
export function createVerifier(endpoint: WebhookEndpointConfig, options: VerifierOptions): Verifier {
  const secret = endpoint.secret ?? "";
  switch (endpoint.auth) {
    case "none":
      return { needsBody: false, refusal: () => null };
    case "bearer":
      return tokenVerifier(secret, "bearer token", (headers) => bearerToken(headers.get("authorization")));
    case "api-key": {
      const header = endpoint.api_key_header ?? "X-API-Key";
      return tokenVerifier(secret, `${header} header`, (headers) => headers.get(header));
    }
    case "hmac-sha256":
      return { needsBody: true, refusal: (headers, body) => hmacRefusal(secret, headers, body) };
    case "standard-webhooks": {
      const key = standardWebhooksKey(secret);
      // The config refuses such a secret; a library caller's own config is told here, at start-up.
      if (key === null) throw new Error(`webhook endpoint ${endpoint.path}: the secret is not a whsec_ key`);
      const check = { key, toleranceS: endpoint.tolerance_s ?? DEFAULT_TOLERANCE_S, now: options.now };
      return { needsBody: true, refusal: (headers, body) => standardWebhooksRefusal(check, headers, body) };
    }
  }
}

/** The header whose value folds redeliveries: `dedupe_header`, and webhook-id for Standard Webhooks. */
export function dedupeHeaderOf(endpoint: WebhookEndpointConfig): string | null {
  return endpoint.dedupe_header ?? (endpoint.auth === "standard-webhooks" ? ID_HEADER : null);
}
