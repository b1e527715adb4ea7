/**
 * Reading the sign-in routes' requests (./routes.ts): a body's fields, sent as a form or as JSON,
 * and whether the caller wants JSON answers or pages.
 */

/** A body's member as sent (JSON may send any type), undefined when absent. */
export function member(body: unknown, name: string): unknown {
  return body !== null && typeof body === "object" ? (body as Record<string, unknown>)[name] : undefined;
}

export function field(body: unknown, name: string): string | undefined {
  const value = member(body, name);
  return typeof value === "string" ? value : undefined;
}

/**
 * Whether to answer with JSON rather than a redirect to a page: unless the caller accepts HTML and
 * not JSON. A browser's form post or navigation names text/html; curl, SDKs, Swagger UI and a
 * page's fetch send `*\/*` or nothing, and a 303 to an HTML page would answer them with a page
 * (a wrong password shown as a 200 sign-in page in Swagger UI).
 */
export function wantsJson(request: Request): boolean {
  const accept = request.headers.get("accept") ?? "";
  return accept.includes("application/json") || !accept.includes("text/html");
}
