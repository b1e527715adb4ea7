/**
 * The request headers stored with a webhook call, for its handler: a fixed allowlist, so that no
 * secret a sender puts in a header (Authorization, a signature, an API key, a cookie) is ever
 * written to the outbox. Each value is cut to HEADER_VALUE_CHARS, so the column stays small
 * whatever a sender sends. Names are stored lower-case; Content-Type has its own column.
 */

/** The headers kept: GitHub's event name and delivery id (triage reads the event), and who sent it. */
const STORED_HEADERS = ["x-github-event", "x-github-delivery", "user-agent"] as const;

export type StoredHeader = (typeof STORED_HEADERS)[number];

const HEADER_VALUE_CHARS = 200;

/** The allowlisted headers of a request as the JSON the outbox stores, or null when it sent none. */
export function storedHeaders(headers: Headers): string | null {
  const kept: Partial<Record<StoredHeader, string>> = {};
  let any = false;
  for (const name of STORED_HEADERS) {
    const value = headers.get(name);
    if (value === null || value === "") continue;
    kept[name] = value.slice(0, HEADER_VALUE_CHARS);
    any = true;
  }
  return any ? JSON.stringify(kept) : null;
}

/** The stored JSON read back; anything but an object of strings reads as no headers. */
export function readStoredHeaders(json: string | null): Partial<Record<StoredHeader, string>> {
  if (json === null) return {};
  try {
    const parsed: unknown = JSON.parse(json);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return {};
    const headers: Partial<Record<StoredHeader, string>> = {};
    for (const name of STORED_HEADERS) {
      const value = (parsed as Record<string, unknown>)[name];
      if (typeof value === "string") headers[name] = value;
    }
    return headers;
  } catch {
    return {};
  }
}
