/**
 * The media type an upstream's answer is relayed with. An event stream stays one; a whole answer
 * keeps a JSON type (or gets application/json when it named none), and any other type becomes
 * text/plain with nosniff: relayed as it came, an upstream's text/html (a proxy's error page, or a
 * hostile server) would render as a page of the gateway's origin, which is the dashboard's, in any
 * browser sent to it (a cross-site form can post a chat request as a top-level navigation).
 */

/** Media types are case-insensitive (`Text/Event-Stream` is one); the lower-case spelling is checked first, as servers send it. */
export function isEventStream(contentType: string): boolean {
  return contentType.includes("text/event-stream") || contentType.toLowerCase().includes("text/event-stream");
}

/** Sets the Content-Type (and, for text, nosniff) of a whole answer whose upstream type was `contentType`. */
export function setWholeAnswerType(headers: Record<string, string>, contentType: string | null): void {
  if (contentType === null) headers["content-type"] = "application/json";
  else if (isJson(contentType)) headers["content-type"] = contentType;
  else {
    headers["content-type"] = "text/plain; charset=utf-8";
    headers["x-content-type-options"] = "nosniff";
  }
}

/** application/json, or a `+json` type (application/problem+json), in any case, with parameters or not. */
function isJson(contentType: string): boolean {
  return contentType.startsWith("application/json") || /^\s*application\/([\w.-]+\+)?json\s*(;|$)/i.test(contentType);
}
