/**
 * The Standard Webhooks scheme (standardwebhooks.com; Svix, Clerk, Resend and others send it):
 * the sender signs `${webhook-id}.${webhook-timestamp}.${body}` with HMAC-SHA256 under the bytes
 * of a `whsec_<base64>` secret, and sends `webhook-signature` as a space-separated list of
 * `v1,<base64>` entries (several while a secret is being rotated; any one may match, other
 * versions such as `v1a` are skipped). A request is refused unless its timestamp lies within
 * `tolerance_s` of the gateway's clock, either way, so a captured request stops working after it.
 * Inside that window a replay carries the same webhook-id, which the gateway de-duplicates on
 * (dedupeHeaderOf in ./auth.ts); ids are remembered at least twice the tolerance
 * (standardWebhooksWindowMs), the longest a signed request can stay acceptable.
 * Comparisons are constant-time; a refusal's reason names what was wrong, never a signature.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

export const SECRET_PREFIX = "whsec_";
export const DEFAULT_TOLERANCE_S = 300;
export const ID_HEADER = "webhook-id";
const TIMESTAMP_HEADER = "webhook-timestamp";
const SIGNATURE_HEADER = "webhook-signature";
const HEADERS = [ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER];
const DIGITS = /^[0-9]{1,15}$/;
const SIGNATURE_BYTES = 32;

/**
 * The key bytes of a `whsec_<base64>` secret, or null when it is not one. Strict base64 (standard
 * alphabet, padding optional): a key read leniently would sign with bytes the sender never had.
 */
export function standardWebhooksKey(secret: string): Buffer | null {
  if (!secret.startsWith(SECRET_PREFIX)) return null;
  const encoded = secret.slice(SECRET_PREFIX.length).replace(/={1,2}$/, "");
  if (!/^[A-Za-z0-9+/]+$/.test(encoded) || encoded.length % 4 === 1) return null;
  return Buffer.from(encoded, "base64");
}

/** The `v1,<base64>` signature of one message, as a sender makes it (the tests hold it to the reference vector). */
export function signStandardWebhook(key: Uint8Array, message: { id: string; timestamp: number; body: Uint8Array | string }): string {
  return `v1,${digest(key, message.id, String(message.timestamp), message.body).toString("base64")}`;
}

function digest(key: Uint8Array, id: string, timestamp: string, body: Uint8Array | string): Buffer {
  return createHmac("sha256", key).update(`${id}.${timestamp}.`).update(body).digest();
}

/** Whether one `v1,<base64>` entry of the header is `expected`. */
function matches(entry: string, expected: Buffer): boolean {
  const comma = entry.indexOf(",");
  if (comma === -1 || entry.slice(0, comma) !== "v1") return false;
  const presented = Buffer.from(entry.slice(comma + 1), "base64");
  return presented.length === SIGNATURE_BYTES && timingSafeEqual(presented, expected);
}

export interface StandardWebhooksCheck {
  key: Uint8Array;
  toleranceS: number;
  now: () => number;
}

/** Why the request must be refused, or null when it is signed and on time (with `body` null: its headers are complete and on time). */
export function standardWebhooksRefusal(check: StandardWebhooksCheck, headers: Headers, body: Uint8Array | null): string | null {
  const values = HEADERS.map((name) => headers.get(name) ?? "");
  const missing = HEADERS.filter((_, i) => values[i] === "");
  if (missing.length > 0) return `no ${missing.join(", ")} header`;
  const [id, timestamp, signatures] = values;
  if (!DIGITS.test(timestamp)) return `${TIMESTAMP_HEADER} is not whole seconds since 1970`;
  const skew = Math.floor(check.now() / 1000) - Number(timestamp);
  if (Math.abs(skew) > check.toleranceS) {
    const side = skew > 0 ? "old" : "ahead of this clock";
    return `${TIMESTAMP_HEADER} ${timestamp} is ${Math.abs(skew)} s ${side}, outside the ${check.toleranceS} s tolerance`;
  }
  if (body === null) return null;
  const expected = digest(check.key, id, timestamp, body);
  const found = signatures.split(" ").some((entry) => matches(entry, expected));
  return found ? null : `no v1 signature in ${SIGNATURE_HEADER} matches`;
}

/**
 * How long webhook-ids must be remembered for `tolerance_s`: a request signed at t is accepted from
 * t - tolerance to t + tolerance, so a replay can follow the first acceptance by twice the tolerance.
 */
export function standardWebhooksWindowMs(toleranceS: number): number {
  return 2 * toleranceS * 1000;
}
