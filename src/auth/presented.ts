/**
 * Which credential a request presents, unchecked, in DESIGN.md's order (src/auth/gate.ts checks
 * it): X-Payment-Signature, then Authorization (or X-Api-Key, as Anthropic's clients send a key),
 * then the mg_session cookie, else nothing (anonymous). A request's first credential decides; a
 * later one is never tried in its place.
 */
import { readSessionCookie } from "./cookies";
import type { IdentityKind } from "../identity-kind";

/** The credential a request presents, unchecked: the first of DESIGN's order (see header). */
type Presented = { kind: "spend_auth" } | { kind: "api_key"; authorization: string } | { kind: "session"; token: string } | { kind: "anonymous" };

const SPEND_AUTH: Presented = { kind: "spend_auth" };
const ANONYMOUS: Presented = { kind: "anonymous" };

/** The one place the identities' order is decided: admission, credentialRefusal and records follow it. */
export function presented(request: Request): Presented {
  const headers = request.headers;
  if (headers.has("x-payment-signature")) return SPEND_AUTH;
  const authorization = headers.get("authorization");
  if (authorization !== null) return { kind: "api_key", authorization };
  const apiKey = headers.get("x-api-key");
  if (apiKey !== null) return { kind: "api_key", authorization: `Bearer ${apiKey}` };
  const token = readSessionCookie(request);
  return token === null ? ANONYMOUS : { kind: "session", token };
}

/** The kind of credential a request presents, unchecked: what a refused request is recorded as (a request with a bad key is not an anonymous caller). */
export function presentedKind(request: Request): IdentityKind {
  return presented(request).kind;
}
