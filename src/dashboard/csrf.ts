/**
 * CSRF protection for the dashboard's own forms, on top of the Origin check the session layer
 * does: every form carries a token derived from the session token (SHA-256 over a label and the
 * cookie value), so it needs no storage, changes with every session, and cannot be computed by a
 * page that cannot read the HttpOnly cookie. Comparison is constant-time.
 */
import { sha256 } from "@oslojs/crypto/sha2";
import { encodeBase64urlNoPadding } from "@oslojs/encoding";
import { equalSecrets } from "../auth/tokens";

const LABEL = new TextEncoder().encode("modelgate dashboard csrf v1\0");

export function csrfToken(sessionToken: string): string {
  const token = new TextEncoder().encode(sessionToken);
  const input = new Uint8Array(LABEL.length + token.length);
  input.set(LABEL);
  input.set(token, LABEL.length);
  return encodeBase64urlNoPadding(sha256(input));
}

export function verifyCsrf(sessionToken: string, presented: unknown): boolean {
  if (typeof presented !== "string" || presented.length === 0 || presented.length > 100) return false;
  return equalSecrets(csrfToken(sessionToken), presented);
}

/**
 * A state-changing request must come from one of our own pages: when the browser names an Origin
 * it must be this server's (the request's own origin or `public_url`).
 */
export function sameOrigin(request: Request, publicUrl: string): boolean {
  const origin = request.headers.get("origin");
  if (origin === null) return request.headers.get("sec-fetch-site") !== "cross-site";
  if (origin === new URL(request.url).origin) return true;
  try {
    return origin === new URL(publicUrl).origin;
  } catch {
    return false;
  }
}
