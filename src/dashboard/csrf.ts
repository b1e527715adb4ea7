/**
 * CSRF protection for the dashboard's own forms, on top of the Origin check the session layer
 * does: every form carries a token derived from the session token (SHA-256 over a label and the
 * cookie value), so it needs no storage, changes with every session, and cannot be computed by a
 * page that cannot read the HttpOnly cookie. Comparison is constant-time.
 */
import { equalSecrets } from "../auth/tokens";

const LABEL = "modelgate dashboard csrf v1\0";

/** base64url (no padding) of SHA-256 over the label's and the session token's UTF-8 bytes. */
export function csrfToken(sessionToken: string): string {
  return Bun.SHA256.hash(LABEL + sessionToken, "base64url");
}

export function verifyCsrf(sessionToken: string, presented: unknown): boolean {
  if (typeof presented !== "string" || presented.length === 0 || presented.length > 100) return false;
  return equalSecrets(csrfToken(sessionToken), presented);
}
