/**
 * What an upstream's answer is taken for: a stream, JSON or something else, by its Content-Type;
 * and whether a whole answer is complete. The type it is relayed with is never the upstream's own
 * string: an event stream goes out as `text/event-stream`, a whole answer of a JSON type (or of
 * none) as `application/json`, anything else as text/plain with nosniff. Relayed as it came, an
 * upstream's text/html (a proxy's error page, a hostile server), or a value a browser reads as
 * HTML (`application/json, text/html`: two headers joined), would render as a page of the
 * gateway's origin, which is the dashboard's, in any browser sent to it.
 */

/**
 * Why a whole 2xx answer cannot be the completion it claims to be, or null: it is empty, or,
 * framed by the connection's close, it ended before its JSON did (the close of a crashed server
 * looks like the end of the body; a length or chunked framing would have shown the cut).
 */
export function incompleteAnswer(text: string, closeDelimited: boolean): string | null {
  if (text.length === 0) return "answered with an empty body";
  if (closeDelimited && !parsesAsJson(text)) return "closed the connection before its answer was whole";
  return null;
}

function parsesAsJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * What an answer's Content-Type declares it to be: the event stream, JSON, or something else
 * (nothing, text/plain), which the caller looks at instead: some servers leave the type out of a
 * stream, or label it wrongly.
 */
export function declaredKind(contentType: string | null): "stream" | "json" | "other" {
  if (contentType === null) return "other";
  const type = mediaType(contentType);
  return type === "text/event-stream" ? "stream" : isJson(type) ? "json" : "other";
}

/**
 * Sets the Content-Type (and, for text, nosniff) of a whole answer whose upstream type was
 * `contentType`; returns what that type declared (declaredKind, but JSON for none).
 */
export function setWholeAnswerType(headers: Record<string, string>, contentType: string | null): "stream" | "json" | "other" {
  const kind = contentType === null || contentType === "application/json" ? "json" : declaredKind(contentType);
  if (kind === "json") headers["content-type"] = "application/json";
  else {
    headers["content-type"] = "text/plain; charset=utf-8";
    headers["x-content-type-options"] = "nosniff";
  }
  return kind;
}

/**
 * The media type of a Content-Type value, lower-case and without parameters (types are
 * case-insensitive: `Text/Event-Stream` is one); null when it may name more than one.
 */
function mediaType(contentType: string): string | null {
  if (contentType.includes(",")) return null;
  const semicolon = contentType.indexOf(";");
  return (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
}

/** application/json, or a `+json` type such as application/problem+json. */
function isJson(type: string | null): boolean {
  return type === "application/json" || (type !== null && /^application\/[\w.-]+\+json$/.test(type));
}

/**
 * The type audio is relayed with: the upstream's when it is audio (or the event stream some
 * servers speak in), else application/octet-stream: an upstream's text/html relayed as it came
 * would render as a page of the gateway's origin (see the header).
 */
export function audioType(contentType: string | null): string {
  return contentType !== null && /^(audio\/[\w.+-]+|text\/event-stream)\s*(;[^,]*)?$/i.test(contentType) ? contentType : "application/octet-stream";
}
