/**
 * The signed-out side of the dashboard: GET /dashboard/signin and /dashboard/signup render the
 * forms, GET /setup the first-run administrator form (the identities part handles the POSTs and
 * sends a refused form post back here with ?error=CODE), and POST /dashboard/signout ends the
 * session (same origin required, but not the CSRF token: a tab opened under an earlier session
 * posts a stale one, and a sign-out that seems to work but does not is the worse outcome; only a
 * page of this origin can send its Origin, and such a page could read the token anyway).
 * A signed-in visitor of sign-in or sign-up goes straight on to `next`. Messages come only from
 * the fixed table in src/auth/refusal.ts; an unknown code shows nothing.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { deleteSession } from "../auth/session";
import { readSessionCookie, serializeCookie, SESSION_COOKIE } from "../auth/cookies";
import { originAllowed } from "../auth/origin-policy";
import type { DashboardAccounts } from "./accounts";
import { redirect, renderPage } from "./layout";
import { refusalMessage, safeNext } from "../auth/refusal";
import { setupTokenValid } from "../auth/setup";
import { signinPage, signupPage } from "./pages/signin";
import { setupLinkInvalidPage, setupPage } from "./pages/setup";

export function authPageRoutes(deps: AppDeps, accounts: DashboardAccounts) {
  const { auth } = deps.config;
  const secure = deps.config.server.public_url.startsWith("https:");
  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard.auth" })
    .get(
      "/dashboard/signin",
      async ({ request, query }) => {
        const next = safeNext(query.next);
        if (await accounts.sessionUser(request)) return redirect(next);
        const response = renderPage({ title: "Sign in", user: null }, signinPage({ auth, next, error: refusalMessage(query.error, auth) }));
        // A session that ended (expired, signed out elsewhere, user disabled) leaves its cookie, which
        // would get this browser's keyless API calls a 401 instead of the anonymous tier: clear it.
        if (readSessionCookie(request) !== null) response.headers.append("set-cookie", serializeCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 }));
        return response;
      },
      hidden,
    )
    .get(
      "/dashboard/signup",
      async ({ request, query }) => {
        const next = safeNext(query.next);
        if (await accounts.sessionUser(request)) return redirect(next);
        return renderPage({ title: "Create an account", user: null }, signupPage({ auth, next, error: refusalMessage(query.error, auth) }));
      },
      hidden,
    )
    .get(
      "/setup",
      async ({ query }) => {
        const token = typeof query.token === "string" ? query.token : "";
        if (!(await setupTokenValid(deps.db, token, deps.now()))) {
          return renderPage({ title: "Set up modelgate", user: null, status: 404 }, setupLinkInvalidPage(refusalMessage("setup_invalid", auth)!));
        }
        return renderPage({ title: "Set up modelgate", user: null }, setupPage({ token, error: refusalMessage(query.error, auth) }));
      },
      hidden,
    )
    .post(
      "/dashboard/signout",
      async ({ request }) => {
        // Another site's post arrives without the (SameSite=Lax) cookie: it must not clear it either.
        if (!originAllowed(request, deps.config.server.public_url)) return redirect("/dashboard");
        const signed = await accounts.sessionUser(request);
        if (signed) await deleteSession(deps.db, signed.token);
        const response = redirect("/dashboard/signin");
        response.headers.append("set-cookie", serializeCookie(SESSION_COOKIE, "", { secure, maxAgeS: 0 }));
        return response;
      },
      hidden,
    );
}
