/**
 * The path and origin of a request's URL, for requests whose URL does not parse. Bun builds
 * `request.url` from the Host header without checking it: `Host: a b`, an empty Host or one with
 * a bad port gives a URL that `new URL` refuses, and a request without a Host (an HTTP/1.0 health
 * check) gives the bare path. Such requests are answered like any other, never with a 500.
 */

/** The URL's pathname as `new URL` gives it, or the raw path when the URL does not parse. */
export function requestPath(url: string): string {
  return URL.parse(url)?.pathname ?? rawPath(url);
}

/** The URL's origin, or null when it does not parse (then no Origin header can match it). */
export function requestOrigin(url: string): string | null {
  return URL.parse(url)?.origin ?? null;
}

/** The path of a URL without allocating a URL object: from the first `/` after the authority, up to `?`. */
export function rawPath(url: string): string {
  const start = url.startsWith("/") ? 0 : url.indexOf("/", url.indexOf("//") + 2);
  if (start === -1) return "/";
  const query = url.indexOf("?", start);
  return query === -1 ? url.slice(start) : url.slice(start, query);
}
