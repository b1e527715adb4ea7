/**
 * Which origins may make a state-changing request with a session cookie: this server's own pages
 * only. A browser always sends Origin on a cross-origin POST, and it must be ours (the request's
 * own origin or public_url); without Origin, Sec-Fetch-Site must not say cross-site. The auth
 * plugin, the Gate and the dashboard's forms all ask here.
 */
import { requestOrigin } from "../requests/url";

/**
 * True when a state-changing request comes from this server's own pages: the same scheme, host
 * and port as the request, or public_url's origin (a server behind a TLS proxy sees http requests
 * for an https origin, so it needs public_url set).
 */
export function originAllowed(request: Request, publicUrl: string): boolean {
  const origin = request.headers.get("origin");
  if (origin === null) return request.headers.get("sec-fetch-site") !== "cross-site";
  return origin === requestOrigin(request.url) || origin === URL.parse(publicUrl)?.origin;
}
