/**
 * Per-endpoint request verification, exactly the interface's four modes:
 * - none: accepts any request;
 * - bearer: `Authorization: Bearer <secret>`;
 * - hmac-sha256: hex HMAC-SHA256 of the raw body under `secret`, optionally prefixed `sha256=`,
 *   from the first present of X-Signature-256, X-Hub-Signature-256, X-Webhook-Signature;
 * - api-key: the secret in `X-API-Key` or the header named by `api_key_header`.
 * Every comparison is constant-time (equalSecrets): tokens are compared as SHA-256 digests (so
 * neither content nor length leaks), HMACs as lowercase hex. Denials are values, never exceptions.
 */
import { createHmac } from "node:crypto";
import type { WebhookEndpointConfig } from "../config/webhooks-schema";
import { bearerToken, equalSecrets, sha256Hex } from "../auth/tokens";

export const SIGNATURE_HEADERS = ["x-signature-256", "x-hub-signature-256", "x-webhook-signature"] as const;
const HEX_64 = /^[0-9a-fA-F]{64}$/;

export interface Verifier {
  /** Whether the mode can decide from the headers alone (before reading the body). */
  readonly needsBody: boolean;
  verify(headers: Headers, body: Uint8Array | null): boolean;
}

function tokenVerifier(secret: string, read: (headers: Headers) => string | null): Verifier {
  const expected = sha256Hex(secret);
  return {
    needsBody: false,
    verify(headers) {
      const presented = read(headers);
      if (presented === null) return false;
      return equalSecrets(sha256Hex(presented), expected);
    },
  };
}


/** HMAC-SHA256 of `body` under `secret`, as lowercase hex (also used by tests and the bench). */
export function signBody(secret: string, body: Uint8Array | string): string {
  return createHmac("sha256", secret).update(body).digest("hex");
}

export function verifySignature(secret: string, header: string | null, body: Uint8Array): boolean {
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

/** Builds the verifier once per endpoint at start-up (config has validated the secret's presence). */
export function createVerifier(endpoint: WebhookEndpointConfig): Verifier {
  const secret = endpoint.secret ?? "";
  switch (endpoint.auth) {
    case "none":
      return { needsBody: false, verify: () => true };
    case "bearer":
      return tokenVerifier(secret, (headers) => bearerToken(headers.get("authorization")));
    case "api-key": {
      const header = (endpoint.api_key_header ?? "X-API-Key").toLowerCase();
      return tokenVerifier(secret, (headers) => headers.get(header));
    }
    case "hmac-sha256":
      return {
        needsBody: true,
        verify: (headers, body) => body !== null && verifySignature(secret, firstSignatureHeader(headers), body),
      };
  }
}
