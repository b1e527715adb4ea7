/**
 * The browser-facing auth controller; its paths and answers are a contract the dashboard builds on:
 *   POST /auth/signup, /auth/login   form-encoded or JSON {email, password, next?}: sets mg_session (and mg_device).
 *                                    For JSON callers (wantsJson): 200 {user} or the gateway's error
 *                                    body. For a browser (Accept names text/html): 303 -> `next` when it is a
 *                                    safe /dashboard path (refusal.ts), else /dashboard; a refusal is
 *                                    303 -> the form's page with ?error=CODE (and next), never JSON.
 *   POST /auth/logout                deletes the session, clears the cookie (303 or 200 the same way)
 *   GET  /auth/me, /auth/providers   the signed-in user; which sign-in methods are on
 *   GET  /auth/{github,google}[?next=]   OAuth redirect (oauth.ts); next waits in a short cookie
 *   GET  /auth/{github,google}/callback  signs in, 303 -> next; a failure 303 -> sign-in ?error=CODE
 *   POST /setup                      the first-run admin form (setup.ts); a refused form post goes
 *                                    303 -> /setup?token=&error=CODE (GET /setup is the dashboard's page)
 *   POST /api/admin/credits          {email, amount} for administrators
 * Only a code from refusal.ts ever travels in a redirect: no email, password or provider text.
 * Every POST here checks Origin; the argon2 forms are throttled per address and per account (per
 * device instead, for a browser that signed in to the account before: device-cookie.ts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { GatewayError } from "../errors";
import { requestMeta } from "../requests/meta";
import { AMOUNT_RULE, parseCredits, formatCredits, PAST_MAX_BALANCE } from "../credits/amount";
import { grantCredits } from "../credits/ledger";
import { authPlugin } from "./plugin";
import { createPasswordSession, deleteSession } from "./session";
import { readCookie, readCookies, readSessionCookie, serializeCookie, SESSION_COOKIE } from "./cookies";
import { originAllowed } from "./origin-policy";
import { checkPassword, createUser, findUserByEmail, signupRefusal } from "./users";
import { normalizeEmail } from "./email";
import { PASSWORD_MAX, passwordProblem } from "./password";
import { finishOAuth, startOAuth, userForProfile, STATE_COOKIE, VERIFIER_COOKIE, type Provider } from "./oauth";
import { completeSetup, setupTokenValid } from "./setup";
import { incorrect, refusal, safeNext, type Back, type Refusal } from "./refusal";
import { field, member, wantsJson } from "./form-body";
import type { SignInThrottle } from "./throttle";
import { DEVICE_COOKIE, deviceOf } from "./device-cookie";
import { AUTH_DOCS } from "./route-docs";
import { createFormAnswers } from "./form-answers";

export interface AuthRoutesDeps extends Pick<AppDeps, "db" | "config" | "now"> {
  throttle: SignInThrottle;
}

type Server = { requestIP(r: Request): { address: string } | null } | null;

const SIGNIN = "/dashboard/signin";
const SIGNUP = "/dashboard/signup";
const NEXT_COOKIE = "mg_oauth_next";

export function authRoutes(deps: AuthRoutesDeps) {
  const { db, config, throttle } = deps;
  const secure = config.server.public_url.startsWith("https://");
  const durationMs = config.auth.session_days * 86_400_000;
  const { refuse, signedIn } = createFormAnswers({ db, config, now: deps.now, secure, durationMs });
  const clearOAuth = [STATE_COOKIE, VERIFIER_COOKIE, NEXT_COOKIE].map((name) => serializeCookie(name, "", { secure, maxAgeS: 0, path: "/auth" }));

  function checkOrigin(request: Request): void {
    if (!originAllowed(request, config.server.public_url)) throw new GatewayError("forbidden", "Cross-origin form posts are refused");
  }

  function originRefusal(request: Request): Refusal | null {
    return originAllowed(request, config.server.public_url) ? null : refusal("origin", "forbidden", "Cross-origin form posts are refused");
  }

  function throttleRefusal(request: Request, server: Server, who: { account?: string; accountId?: number; device?: string }): Refusal | null {
    const wait = throttle.attempt({ address: requestMeta(request).clientIp(server), ...who });
    if (wait === null) return null;
    return refusal("throttled", "rate_limit_exceeded", `Too many attempts; try again in ${wait} s`, { headers: { "retry-after": String(Math.max(1, wait)) } });
  }

  function startSignIn(request: Request, provider: Provider, next: string): Response {
    const started = startOAuth(config, provider);
    if (!started)
      return refuse(request, { page: SIGNIN, next }, refusal("oauth_unavailable", "not_found", `${provider} sign-in is not configured on this gateway`));
    const headers = new Headers({ location: started.url.toString(), "x-request-id": requestMeta(request).id });
    const cookie = (name: string, value: string): string => serializeCookie(name, value, { secure, maxAgeS: 600, path: "/auth" });
    headers.append("set-cookie", cookie(STATE_COOKIE, started.state));
    if (started.verifier) headers.append("set-cookie", cookie(VERIFIER_COOKIE, started.verifier));
    headers.append("set-cookie", cookie(NEXT_COOKIE, next));
    return new Response(null, { status: 302, headers });
  }

  async function finishSignIn(request: Request, provider: Provider, query: Record<string, string | undefined>): Promise<Response> {
    const back: Back = { page: SIGNIN, next: safeNext(readCookie(request, NEXT_COOKIE)), cookies: clearOAuth };
    if (typeof query.error === "string") {
      // Anyone can send this link: only an OAuth error code (access_denied) is quoted, never free text.
      const code = /^[A-Za-z0-9_.-]{1,64}$/.test(query.error) ? ` (${query.error})` : "";
      return refuse(request, back, refusal("oauth_cancelled", "invalid_request_error", `Sign-in was not completed at ${provider}${code}`));
    }
    const profile = await finishOAuth(config, provider, {
      code: query.code ?? null,
      state: query.state ?? null,
      expectedState: readCookie(request, STATE_COOKIE),
      verifier: readCookie(request, VERIFIER_COOKIE),
    });
    const user = "error" in profile ? profile : await userForProfile(db, config, profile);
    if ("error" in user) {
      const code = user.status === 403 ? "forbidden" : user.status === 502 ? "upstream_error" : "invalid_request_error";
      return refuse(request, back, refusal(user.reason, code, user.error));
    }
    return signedIn(request, user, { next: back.next, cookies: clearOAuth });
  }

  return new Elysia({ name: "modelgate.auth-routes" })
    .use(authPlugin(deps))
    .get(
      "/auth/providers",
      () => ({
        password: true,
        github: config.auth.github !== undefined,
        google: config.auth.google !== undefined,
        signup: config.auth.signup,
      }),
      { detail: AUTH_DOCS.providers },
    )
    .get(
      "/auth/me",
      ({ user, set }) => {
        set.headers["cache-control"] = "no-store"; // one user's account, never for a shared cache
        return { user: { id: user.userId, email: user.email, is_admin: user.isAdmin }, expires_at: user.expiresAt };
      },
      { session: true, detail: AUTH_DOCS.me },
    )
    .post(
      "/auth/signup",
      async ({ request, body, server }) => {
        const back: Back = { page: SIGNUP, next: safeNext(field(body, "next")) };
        const email = normalizeEmail(field(body, "email"));
        const refused = originRefusal(request) ?? throttleRefusal(request, server, { account: email ?? undefined });
        if (refused) return refuse(request, back, refused);
        if (config.auth.signup === "closed") return refuse(request, back, refusal("signup_closed", "forbidden", signupRefusal(config.auth, "")!));
        if (email === null) return refuse(request, back, refusal("email", "invalid_request_error", "Enter a valid email address", { param: "email" }));
        const policy = signupRefusal(config.auth, email);
        if (policy) return refuse(request, back, refusal("signup_domain", "forbidden", policy));
        // Nothing proves the address typed here: OAuth sign-in and setup will not join this account.
        const password = member(body, "password");
        const problem = passwordProblem(password);
        if (problem) return refuse(request, back, refusal("password", "invalid_request_error", problem, { param: "password" }));
        const created = await createUser(db, { email, password: password as string, emailUnverified: true });
        if ("error" in created) {
          return refuse(
            request,
            back,
            refusal(created.param === "email" ? "email_taken" : "password", "invalid_request_error", created.error, { param: created.param }),
          );
        }
        return signedIn(request, created, { next: back.next, device: created });
      },
      { detail: AUTH_DOCS.signup },
    )
    .post(
      "/auth/login",
      async ({ request, body, server }) => {
        const back: Back = { page: SIGNIN, next: safeNext(field(body, "next")) };
        const email = normalizeEmail(field(body, "email"));
        const account = email === null ? null : await findUserByEmail(db, email);
        const device = account === null ? null : deviceOf(readCookies(request, DEVICE_COOKIE), account);
        const refused =
          originRefusal(request) ?? throttleRefusal(request, server, { account: email ?? undefined, accountId: account?.id, device: device ?? undefined });
        if (refused) return refuse(request, back, refused);
        const password = field(body, "password");
        // Longer than any valid password can be (PASSWORD_MAX characters, two UTF-16 units at most each): not hashed.
        if (email === null || password === undefined || password.length > 2 * PASSWORD_MAX) return refuse(request, back, incorrect());
        const checked = await checkPassword(db, email, password);
        if (!checked.ok) {
          return refuse(request, back, checked.reason === "disabled" ? refusal("disabled", "forbidden", "This account is disabled") : incorrect());
        }
        const session = await createPasswordSession(db, { userId: checked.user.id, passwordHash: checked.user.passwordHash, now: deps.now(), durationMs });
        if (session === null) return refuse(request, back, incorrect()); // the password changed meanwhile
        return signedIn(request, checked.user, { next: back.next, device: checked.user, session });
      },
      { detail: AUTH_DOCS.login },
    )
    .post(
      "/auth/logout",
      async ({ request }) => {
        checkOrigin(request);
        const token = readSessionCookie(request);
        if (token !== null) await deleteSession(db, token);
        const headers = new Headers({ "x-request-id": requestMeta(request).id });
        headers.append("set-cookie", serializeCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 }));
        if (wantsJson(request)) {
          headers.set("content-type", "application/json");
          return new Response(JSON.stringify({ signed_out: true }), { status: 200, headers });
        }
        headers.set("location", "/dashboard");
        return new Response(null, { status: 303, headers });
      },
      { detail: AUTH_DOCS.logout },
    )
    .post(
      "/setup",
      async ({ request, body, server }) => {
        const token = field(body, "token") ?? "";
        // The form goes back to the link only while the link still works.
        const back = async (): Promise<Back> => ((await setupTokenValid(db, token, deps.now())) ? { page: "/setup", token } : { page: "/setup" });
        const refused = originRefusal(request) ?? throttleRefusal(request, server, { account: normalizeEmail(field(body, "email")) ?? undefined });
        if (refused) return refuse(request, await back(), refused);
        const result = await completeSetup(db, { token, email: field(body, "email"), password: member(body, "password"), now: deps.now() });
        if ("error" in result) {
          const reason = result.reason ?? (result.param === "email" ? "email" : result.param === "password" ? "password" : "setup_invalid");
          return refuse(request, await back(), refusal(reason, "invalid_request_error", result.error, { param: result.param ?? "token" }));
        }
        // No device token here: the cookie is scoped to /auth, so this answer would replace the
        // browser's tokens for other accounts with one for the new administrator.
        return signedIn(request, result, {});
      },
      { detail: AUTH_DOCS.setup },
    )
    .post(
      "/api/admin/credits",
      async ({ body, user }) => {
        const given = field(body, "email");
        if (!given) throw new GatewayError("invalid_request_error", "email is required: the user to grant credits to", { param: "email" });
        const email = normalizeEmail(given);
        const target = email === null ? null : await findUserByEmail(db, email);
        if (target === null) throw new GatewayError("not_found", `No user with the email ${JSON.stringify(given)}`, { param: "email" });
        const amount = body !== null && typeof body === "object" ? (body as Record<string, unknown>).amount : undefined;
        const micro = parseCredits(amount);
        if (micro === null) throw new GatewayError("invalid_request_error", `amount must be ${AMOUNT_RULE}, e.g. "12.50"`, { param: "amount" });
        const note = field(body, "note") ?? `granted by ${user.email}`;
        const balance = await grantCredits(db, { userId: target.id, micro, note, now: deps.now() });
        if (balance === null) throw new GatewayError("invalid_request_error", `amount: ${PAST_MAX_BALANCE}`, { param: "amount" });
        return { email: target.email, granted: formatCredits(micro), balance: formatCredits(balance) };
      },
      { admin: true, detail: AUTH_DOCS.grantCredits },
    )
    .get("/auth/github", ({ request, query }) => startSignIn(request, "github", safeNext(query.next)), { detail: AUTH_DOCS.oauthStart })
    .get("/auth/google", ({ request, query }) => startSignIn(request, "google", safeNext(query.next)), { detail: AUTH_DOCS.oauthStart })
    .get("/auth/github/callback", ({ request, query }) => finishSignIn(request, "github", query), { detail: AUTH_DOCS.oauthCallback })
    .get("/auth/google/callback", ({ request, query }) => finishSignIn(request, "google", query), { detail: AUTH_DOCS.oauthCallback });
}
