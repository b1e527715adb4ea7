/**
 * Secrets the Lucia way: tokens are random bytes encoded in lower-case base32, only their SHA-256
 * (hex) is ever stored, and stored hashes are compared in constant time.
 */
import { encodeBase32LowerCaseNoPadding } from "@oslojs/encoding";

/** `bytes` random bytes as lower-case base32 (a-z, 2-7): 20 bytes -> 32 characters. */
export function randomToken(bytes: number): string {
  return encodeBase32LowerCaseNoPadding(crypto.getRandomValues(new Uint8Array(bytes)));
}

export function sha256Hex(text: string): string {
  return Bun.SHA256.hash(text, "hex");
}

/** The token of an `Authorization: Bearer <token>` header (scheme case-insensitive), or null. */
export function bearerToken(header: string | null): string | null {
  if (header === null || header.length < 8) return null;
  if (!header.startsWith("Bearer ") && header.slice(0, 7).toLowerCase() !== "bearer ") return null;
  const token = header.slice(7).trim();
  return token.length > 0 ? token : null;
}

/**
 * Constant-time equality of two strings of the same length (hashes, states). The one comparison
 * of secrets in the gateway: a presented secret is hashed first (sha256Hex), so that neither its
 * content nor its length shows in the time taken.
 */
export function equalSecrets(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return difference === 0;
}
