/**
 * The browser-facing auth controller; its paths and answers are a contract the dashboard builds on:
 *   POST /auth/signup, /auth/login   form-encoded or JSON {email, password}: sets mg_session, then
 *                                    303 -> /dashboard, or 200 {user} when Accept is application/json
 *   POST /auth/logout                deletes the session, clears the cookie (303 or 200 the same way)
 *   GET  /auth/me, /auth/providers   the signed-in user; which sign-in methods are on
 *   GET  /auth/{github,google}[/callback]   OAuth redirect and callback (oauth.ts)
 *   GET  /setup?token=, POST /setup  the first-run admin form (setup.ts)
 *   POST /api/admin/credits          {email, amount} for administrators
 * Errors use the gateway's one error shape. Every POST here checks Origin; the argon2 forms are
 * throttled per address and per account (throttle.ts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { GatewayError } from "../errors";
import { requestMeta } from "../request-meta";
import { parseCredits, formatCredits } from "../credits/amount";
import { grantCredits } from "../credits/ledger";
import { authPlugin } from "./plugin";
import { createSession, deleteSession, originAllowed, readCookie, serializeCookie, SESSION_COOKIE } from "./session";
import { createUser, findUserByEmail, normalizeEmail, PASSWORD_MAX, signupRefusal, verifyPassword, type User } from "./users";
import { finishOAuth, startOAuth, userForProfile, STATE_COOKIE, VERIFIER_COOKIE, type Provider } from "./oauth";
import { completeSetup, setupPage, setupTokenValid } from "./setup";
import type { SignInThrottle } from "./throttle";

export interface AuthRoutesDeps extends Pick<AppDeps, "db" | "config" | "now"> {
  throttle: SignInThrottle;
}

type Server = { requestIP(r: Request): { address: string } | null } | null;

function field(body: unknown, name: string): string | undefined {
  const value = body !== null && typeof body === "object" ? (body as Record<string, unknown>)[name] : undefined;
  return typeof value === "string" ? value : undefined;
}

function wantsJson(request: Request): boolean {
  return (request.headers.get("accept") ?? "").includes("application/json");
}

function userJson(user: Pick<User, "id" | "email" | "isAdmin">): { id: number; email: string; is_admin: boolean } {
  return { id: user.id, email: user.email, is_admin: user.isAdmin };
}

export function authRoutes(deps: AuthRoutesDeps) {
  const { db, config, throttle } = deps;
  const secure = config.server.public_url.startsWith("https://");
  const durationMs = config.auth.session_days * 86_400_000;
  const clearOAuth = [STATE_COOKIE, VERIFIER_COOKIE].map((name) => serializeCookie(name, "", { secure, maxAgeS: 0, path: "/auth" }));

  function checkOrigin(request: Request): void {
    if (!originAllowed(request, config.server.public_url)) throw new GatewayError("forbidden", "Cross-origin form posts are refused");
  }

  function throttled(request: Request, server: Server, account?: string): void {
    const wait = throttle.attempt({ address: requestMeta(request).clientIp(server), account });
    if (wait !== null) {
      throw new GatewayError("rate_limit_exceeded", `Too many attempts; try again in ${wait} s`, { headers: { "retry-after": String(Math.max(1, wait)) } });
    }
  }

  /** Starts a session for `user` and answers the way the form or the script expects. */
  function signedIn(request: Request, user: Pick<User, "id" | "email" | "isAdmin">, extraCookies: string[] = []): Response {
    const session = createSession(db, { userId: user.id, now: deps.now(), durationMs });
    const headers = new Headers({ "x-request-id": requestMeta(request).id });
    headers.append("set-cookie", serializeCookie(SESSION_COOKIE, session.token, { secure, expiresAt: session.expiresAt }));
    for (const cookie of extraCookies) headers.append("set-cookie", cookie);
    if (wantsJson(request)) {
      headers.set("content-type", "application/json");
      return new Response(JSON.stringify({ user: userJson(user), expires_at: session.expiresAt }), { status: 200, headers });
    }
    headers.set("location", "/dashboard");
    return new Response(null, { status: 303, headers });
  }

  function startSignIn(request: Request, provider: Provider): Response {
    const started = startOAuth(config, provider);
    if (!started) throw new GatewayError("not_found", `${provider} sign-in is not configured on this gateway`);
    const headers = new Headers({ location: started.url.toString(), "x-request-id": requestMeta(request).id });
    headers.append("set-cookie", serializeCookie(STATE_COOKIE, started.state, { secure, maxAgeS: 600, path: "/auth" }));
    if (started.verifier) headers.append("set-cookie", serializeCookie(VERIFIER_COOKIE, started.verifier, { secure, maxAgeS: 600, path: "/auth" }));
    return new Response(null, { status: 302, headers });
  }

  async function finishSignIn(request: Request, provider: Provider, query: Record<string, string | undefined>): Promise<Response> {
    if (typeof query.error === "string") {
      throw new GatewayError("invalid_request_error", `Sign-in was not completed at ${provider} (${query.error.slice(0, 100)})`);
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
      throw new GatewayError(code, user.error);
    }
    return signedIn(request, user, clearOAuth);
  }

  function htmlResponse(body: string, status: number): Response {
    return new Response(body, { status, headers: { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" } });
  }

  return new Elysia({ name: "modelgate.auth-routes" })
    .use(authPlugin(deps))
    .get("/auth/providers", () => ({
      password: true,
      github: config.auth.github !== undefined,
      google: config.auth.google !== undefined,
      signup: config.auth.signup,
    }))
    .get("/auth/me", ({ user }) => ({ user: { id: user.userId, email: user.email, is_admin: user.isAdmin }, expires_at: user.expiresAt }), { session: true })
    .post("/auth/signup", async ({ request, body, server }) => {
      checkOrigin(request);
      throttled(request, server);
      const email = normalizeEmail(field(body, "email"));
      if (config.auth.signup === "closed") throw new GatewayError("forbidden", signupRefusal(config.auth, "")!);
      if (email === null) throw new GatewayError("invalid_request_error", "Enter a valid email address", { param: "email" });
      const refusal = signupRefusal(config.auth, email);
      if (refusal) throw new GatewayError("forbidden", refusal);
      const created = await createUser(db, { email, password: field(body, "password") ?? "" });
      if ("error" in created) throw new GatewayError("invalid_request_error", created.error, { param: created.param });
      return signedIn(request, created);
    })
    .post("/auth/login", async ({ request, body, server }) => {
      checkOrigin(request);
      const email = normalizeEmail(field(body, "email"));
      throttled(request, server, email ?? undefined);
      const password = field(body, "password");
      if (email === null || password === undefined || password.length > PASSWORD_MAX) {
        throw new GatewayError("invalid_credentials", "The email or password is incorrect");
      }
      const user = await verifyPassword(db, email, password);
      if (user === null) throw new GatewayError("invalid_credentials", "The email or password is incorrect");
      return signedIn(request, user);
    })
    .post("/auth/logout", ({ request }) => {
      checkOrigin(request);
      const token = readCookie(request, SESSION_COOKIE);
      if (token !== null) deleteSession(db, token);
      const headers = new Headers({ "x-request-id": requestMeta(request).id });
      headers.append("set-cookie", serializeCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 }));
      if (wantsJson(request)) {
        headers.set("content-type", "application/json");
        return new Response(JSON.stringify({ signed_out: true }), { status: 200, headers });
      }
      headers.set("location", "/dashboard");
      return new Response(null, { status: 303, headers });
    })
    .get("/setup", ({ query }) => {
      const token = typeof query.token === "string" ? query.token : "";
      if (!setupTokenValid(db, token, deps.now())) {
        return htmlResponse("<!doctype html><title>modelgate setup</title><p>This setup link is invalid, expired or already used.</p>", 404);
      }
      return htmlResponse(setupPage({ token }), 200);
    })
    .post("/setup", async ({ request, body, server }) => {
      checkOrigin(request);
      throttled(request, server);
      const token = field(body, "token") ?? "";
      const result = await completeSetup(db, { token, email: field(body, "email"), password: field(body, "password"), now: deps.now() });
      if ("error" in result) {
        if (wantsJson(request) || !setupTokenValid(db, token, deps.now())) {
          throw new GatewayError("invalid_request_error", result.error, { param: result.param ?? "token" });
        }
        return htmlResponse(setupPage({ token, error: result.error }), 400);
      }
      return signedIn(request, result);
    })
    .post(
      "/api/admin/credits",
      ({ body, user }) => {
        const email = normalizeEmail(field(body, "email"));
        const target = email === null ? null : findUserByEmail(db, email);
        if (target === null) throw new GatewayError("not_found", `No user with the email ${JSON.stringify(field(body, "email") ?? "")}`, { param: "email" });
        const amount = body !== null && typeof body === "object" ? (body as Record<string, unknown>).amount : undefined;
        const micro = parseCredits(amount);
        if (micro === null) throw new GatewayError("invalid_request_error", "amount must be a positive number of credits with at most 6 decimals, e.g. \"12.50\"", { param: "amount" });
        const note = field(body, "note")?.slice(0, 200) ?? `granted by ${user.email}`;
        const balance = grantCredits(db, { userId: target.id, micro, note, now: deps.now() });
        return { email: target.email, granted: formatCredits(micro), balance: formatCredits(balance) };
      },
      { admin: true },
    )
    .get("/auth/github", ({ request }) => startSignIn(request, "github"))
    .get("/auth/google", ({ request }) => startSignIn(request, "google"))
    .get("/auth/github/callback", ({ request, query }) => finishSignIn(request, "github", query))
    .get("/auth/google/callback", ({ request, query }) => finishSignIn(request, "google", query));
}
