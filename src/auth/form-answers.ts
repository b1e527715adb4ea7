/**
 * How the auth controller (./routes.ts) answers a form post, the same contract for a browser and a
 * script (wantsJson): a refusal goes back to the form's page with ?error=CODE, or is the error body
 * with the page's words in `display`; a sign-in sets mg_session (and, for a password, mg_device)
 * and goes on to `next`, or is 200 {user, expires_at}.
 */
import type { AppDeps } from "../deps";
import { errorResponse, GatewayError } from "../errors";
import { requestMeta } from "../requests/meta";
import { createSession } from "./session";
import { readCookies, serializeCookie, SESSION_COOKIE, SESSION_COOKIE_MAX_AGE_S } from "./cookies";
import type { User } from "./users";
import { refusalMessage, type Back, type Refusal } from "./refusal";
import { wantsJson } from "./form-body";
import { DEVICE_COOKIE, DEVICE_COOKIE_MAX_AGE_S, DEVICE_COOKIE_PATH, issueDeviceCookie, type DeviceAccount } from "./device-cookie";

export interface FormAnswerDeps extends Pick<AppDeps, "db" | "config" | "now"> {
  /** Whether cookies are Secure: the gateway is served over https. */
  secure: boolean;
  durationMs: number;
}

interface SignInOptions {
  next?: string;
  cookies?: string[];
  device?: DeviceAccount;
  session?: { token: string; expiresAt: number };
}

export interface FormAnswers {
  refuse(request: Request, back: Back, refused: Refusal): Response;
  signedIn(request: Request, user: Pick<User, "id" | "email" | "isAdmin">, options: SignInOptions): Promise<Response>;
}

function userJson(user: Pick<User, "id" | "email" | "isAdmin">): { id: number; email: string; is_admin: boolean } {
  return { id: user.id, email: user.email, is_admin: user.isAdmin };
}

export function createFormAnswers(deps: FormAnswerDeps): FormAnswers {
  const { db, config, secure, durationMs } = deps;

  /**
   * A refused form post goes back to its page with ?error=CODE. A script (Accept: JSON) gets the
   * error body, whose message has the details, plus `display`: the words the page shows for that
   * code, which the dashboard's script shows, so a refusal reads the same with or without it.
   */
  function refuse(request: Request, back: Back, refused: Refusal): Response {
    const id = requestMeta(request).id;
    let response: Response;
    if (wantsJson(request)) {
      const { code, message, options } = refused.error;
      const display = refusalMessage(refused.reason, config.auth);
      response = errorResponse(new GatewayError(code, message, { ...options, extra: { ...options.extra, display } }), { "x-request-id": id });
    } else {
      const query = new URLSearchParams();
      if (back.token !== undefined) query.set("token", back.token);
      query.set("error", refused.reason);
      if (back.next !== undefined && back.next !== "/dashboard") query.set("next", back.next);
      response = new Response(null, { status: 303, headers: { location: `${back.page}?${query}`, "cache-control": "no-store", "x-request-id": id } });
    }
    for (const cookie of back.cookies ?? []) response.headers.append("set-cookie", cookie);
    return response;
  }

  /**
   * Starts a session for `user` (or takes `options.session`, made already) and answers the way the
   * form or the script expects. A password sign-in or sign-up (`device`: the account as it signed
   * in) also gives the browser its device token.
   */
  async function signedIn(request: Request, user: Pick<User, "id" | "email" | "isAdmin">, options: SignInOptions): Promise<Response> {
    const session = options.session ?? (await createSession(db, { userId: user.id, now: deps.now(), durationMs }));
    const headers = new Headers({ "x-request-id": requestMeta(request).id });
    headers.append("set-cookie", serializeCookie(SESSION_COOKIE, session.token, { secure, maxAgeS: SESSION_COOKIE_MAX_AGE_S }));
    const device = options.device ? issueDeviceCookie(options.device, readCookies(request, DEVICE_COOKIE)) : null;
    if (device !== null)
      headers.append("set-cookie", serializeCookie(DEVICE_COOKIE, device, { secure, maxAgeS: DEVICE_COOKIE_MAX_AGE_S, path: DEVICE_COOKIE_PATH }));
    for (const cookie of options.cookies ?? []) headers.append("set-cookie", cookie);
    if (wantsJson(request)) {
      headers.set("content-type", "application/json");
      return new Response(JSON.stringify({ user: userJson(user), expires_at: session.expiresAt }), { status: 200, headers });
    }
    headers.set("location", options.next ?? "/dashboard");
    return new Response(null, { status: 303, headers });
  }

  return { refuse, signedIn };
}
