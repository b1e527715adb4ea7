/**
 * Cross-origin access to the API (`/v1/*`, `/api/health`, `/api/status`) for pages in a browser
 * that call it with a key they hold (a chat UI served elsewhere, Open WebUI's direct connections).
 * Off unless `server.cors_origins` lists origins (or `"*"`): a gateway on a LAN would otherwise let
 * any website its users visit call its free models through their browsers.
 *
 * Invariants: no Access-Control-Allow-Credentials, ever, so a browser never sends the dashboard's
 * session cookie cross-origin (a key or a payment header must be sent explicitly); the dashboard,
 * sign-in and admin routes never get CORS headers.
 */
import { requestOrigin } from "./requests/url";

/** Headers a page may read from an answer, beyond the CORS-safelisted ones. */
const EXPOSED =
  "x-request-id, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, retry-after, x-gateway-overhead-ms, " +
  "x-payment-required, x-payment-required-operator, x-payment-required-service-id, x-payment-required-chain-id, x-payment-required-contract";
/** Request headers allowed when a preflight does not name its own (or names them malformed). */
const DEFAULT_ALLOWED = "authorization, content-type, x-payment-signature";
/** A preflight's Access-Control-Request-Headers: field names separated by commas. */
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(?:\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/;
const PREFLIGHT_MAX_AGE_S = "600";

export interface Cors {
  /** Whether `request`'s Origin is one server.cors_origins lets in. */
  allows(request: Request): boolean;
  /** Adds the CORS headers an answer to `request` needs (nothing for an origin not allowed). */
  decorate(request: Request, headers: Headers | Record<string, string>): void;
  /** The answer to a preflight (OPTIONS) request: 204, with CORS headers when the origin is allowed. */
  preflight(request: Request, requestId: string): Response;
}

/** An entry of server.cors_origins: `*`, or an origin exactly as a browser sends it. */
export function isCorsOrigin(entry: string): boolean {
  return entry === "*" || URL.parse(entry)?.origin === entry;
}

/** Whether a path is part of the API that CORS opens (never the dashboard, sign-in or admin routes). */
export function isCorsPath(pathname: string): boolean {
  return pathname.startsWith("/v1/") || pathname === "/api/health" || pathname === "/api/status";
}

/**
 * A browser's request made for a page of another origin (a form post, a no-cors fetch: neither
 * needs a preflight) that `cors` does not let in. Without this check any website could use a LAN
 * gateway's free models through its visitors' browsers. A browser sends Origin with every POST
 * (Sec-Fetch-Site only to https and loopback, so it cannot be relied on); SDKs, curl and servers
 * send none. The gateway's own pages are its origin: the request's own, or `publicUrl`'s.
 */
export function fromForeignPage(request: Request, cors: Cors | null, publicUrl: string): boolean {
  const origin = request.headers.get("origin");
  if (origin === null || cors?.allows(request)) return false;
  return origin !== requestOrigin(request.url) && origin !== URL.parse(publicUrl)?.origin;
}

/** The CORS policy of `origins` (already checked by the config), or null when it is off. */
export function createCors(origins: string[]): Cors | null {
  if (origins.length === 0) return null;
  const any = origins.includes("*");
  const listed = new Set(origins.map((o) => o.toLowerCase()));
  /**
   * The Access-Control-Allow-Origin value for a request, or null. With "*" every answer carries it,
   * Origin or not, so a shared cache cannot hand a browser a copy made without it.
   */
  const allowOrigin = (request: Request): string | null => {
    if (any) return "*";
    const origin = request.headers.get("origin");
    return origin !== null && listed.has(origin.toLowerCase()) ? origin : null;
  };
  const set = (headers: Headers | Record<string, string>, name: string, value: string): void => {
    if (headers instanceof Headers) headers.set(name, value);
    else headers[name] = value;
  };
  return {
    allows: (request) => allowOrigin(request) !== null,
    decorate(request, headers) {
      const allowed = allowOrigin(request);
      if (!any) set(headers, "vary", "origin");
      if (allowed === null) return;
      set(headers, "access-control-allow-origin", allowed);
      set(headers, "access-control-expose-headers", EXPOSED);
    },
    preflight(request, requestId) {
      const headers = new Headers({ vary: "origin, access-control-request-headers", "x-request-id": requestId });
      const allowed = allowOrigin(request);
      if (allowed !== null) {
        const asked = request.headers.get("access-control-request-headers")?.trim() ?? "";
        headers.set("access-control-allow-origin", allowed);
        headers.set("access-control-allow-methods", "GET, POST, OPTIONS");
        headers.set("access-control-allow-headers", asked.length <= 1024 && HEADER_LIST.test(asked) ? asked : DEFAULT_ALLOWED);
        headers.set("access-control-max-age", PREFLIGHT_MAX_AGE_S);
      }
      return new Response(null, { status: 204, headers });
    },
  };
}
