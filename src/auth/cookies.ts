/**
 * The cookie codec the gateway reads and writes its cookies with (the session, OAuth's state and
 * verifier, the device token, the sign-in page's `next`): reading a value out of the Cookie header,
 * and writing a Set-Cookie line that is always HttpOnly and SameSite=Lax. Also the session
 * cookie's name and lifetime, which ./session.ts's rows outlive or not.
 */

export const SESSION_COOKIE = "mg_session";
/**
 * The cookie's own lifetime: 400 days, the most browsers keep a cookie. The session row's sliding
 * expiry decides whether it still signs in; a cookie that expired at sign-in + session_days would
 * end an active user's session however recently they used it.
 */
export const SESSION_COOKIE_MAX_AGE_S = 400 * 86_400;

/** The value of cookie `name` in the request's Cookie header, or null. */
export function readCookie(request: Request, name: string): string | null {
  // Checked first: most API requests carry no cookie, and they are spared the list.
  return request.headers.has("cookie") ? (readCookies(request, name)[0] ?? null) : null;
}

/**
 * The session cookie: of several, the last. The gateway sets it HttpOnly at Path=/, the widest
 * path, which browsers send last; a page on another port of this host (cookies ignore ports)
 * can only add one at a narrower path, which comes first. Taking the first would sign the browser
 * into whatever session that page planted (cookie tossing).
 */
export function readSessionCookie(request: Request): string | null {
  return request.headers.has("cookie") ? (readCookies(request, SESSION_COOKIE).at(-1) ?? null) : null;
}

/** Every value of the cookie `name`: a browser sends one for each path it was set at, the most specific first. */
export function readCookies(request: Request, name: string): string[] {
  const header = request.headers.get("cookie");
  if (header === null) return [];
  const values: string[] = [];
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq !== -1 && part.slice(0, eq).trim() === name) values.push(part.slice(eq + 1).trim());
  }
  return values;
}

export interface CookieOptions {
  secure: boolean;
  /** Seconds the browser keeps it; 0 clears it. */
  maxAgeS: number;
  path?: string;
}

export function serializeCookie(name: string, value: string, options: CookieOptions): string {
  const parts = [`${name}=${value}`, `Path=${options.path ?? "/"}`, "HttpOnly", "SameSite=Lax"];
  if (options.secure) parts.push("Secure");
  parts.push(`Max-Age=${options.maxAgeS}`);
  return parts.join("; ");
}
