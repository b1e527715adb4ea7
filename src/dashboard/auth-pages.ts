/**
 * The signed-out side of the dashboard: GET /dashboard/signin and /dashboard/signup render the
 * forms (the identities part handles the POSTs), and POST /dashboard/signout ends the session
 * (same origin and CSRF token required).
 * A signed-in visitor of sign-in or sign-up goes straight to the dashboard.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { deleteSession, serializeCookie, SESSION_COOKIE } from "../auth/session";
import type { DashboardAccounts } from "./accounts";
import { sameOrigin, verifyCsrf } from "./csrf";
import { redirect, renderPage } from "./layout";
import { safeNext, signinPage, signupPage } from "./pages/signin";

export function authRoutes(deps: AppDeps, accounts: DashboardAccounts) {
  const { auth } = deps.config;
  const secure = deps.config.server.public_url.startsWith("https:");
  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard.auth" })
    .get("/dashboard/signin", ({ request, query }) => {
      const next = safeNext(query.next);
      if (accounts.sessionUser(request)) return redirect(next);
      return renderPage({ title: "Sign in", user: null }, signinPage({ auth, next }));
    }, hidden)
    .get("/dashboard/signup", ({ request, query }) => {
      const next = safeNext(query.next);
      if (accounts.sessionUser(request)) return redirect(next);
      return renderPage({ title: "Create an account", user: null }, signupPage({ auth, next }));
    }, hidden)
    .post("/dashboard/signout", ({ request, body }) => {
      const signed = accounts.sessionUser(request);
      const form = (body && typeof body === "object" ? body : {}) as Record<string, unknown>;
      if (signed && sameOrigin(request, deps.config.server.public_url) && verifyCsrf(signed.token, form.csrf)) {
        deleteSession(deps.db, signed.token);
      } else if (signed) {
        return redirect("/dashboard");
      }
      const response = redirect("/dashboard/signin");
      response.headers.append("set-cookie", serializeCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 }));
      return response;
    }, hidden);
}
