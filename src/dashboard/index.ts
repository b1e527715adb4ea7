/**
 * The dashboard at /dashboard: one Elysia controller of server-rendered pages, the embedded
 * stylesheet and client script, and the form handlers behind the pages. Invariants: every page
 * but sign-in and sign-up needs a session (else a redirect to sign-in), admin pages need an
 * admin (else 403), every state-changing form needs a same-origin request and the session's
 * CSRF token, and a created key appears in exactly one response.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { createAccounts, type DashboardAccounts, type Form, type Guarded } from "./accounts";
import { csrfToken, verifyCsrf } from "./csrf";
import { originAllowed } from "../auth/origin-policy";
import { requestPath } from "../requests/url";
import { html } from "./html";
import { redirect, renderPage, type NavKey, type PageOptions } from "./layout";
import { SCRIPT, STYLE } from "./assets";
import { modelsPage } from "./pages/models";
import { playgroundPage } from "./pages/playground";
import { usagePage, USAGE_DAYS } from "./pages/usage";
import { authPageRoutes } from "./auth-pages";
import { dailyUsage, recentRequests } from "./usage-query";
import { createKeyReveals, type KeyReveals } from "./key-reveals";
import { usageRoutes } from "./usage-routes";
import { adminRoutes, idOf } from "./admin-routes";
import { keyRoutes } from "./key-routes";
import { alertsPage, recentAlerts } from "./pages/alerts";
import { retryDeliveries } from "../webhooks/triage/delivery-rows";

export function dashboardRoutes(deps: AppDeps, options: { accounts?: DashboardAccounts; reveals?: KeyReveals } = {}) {
  const accounts = options.accounts ?? createAccounts(deps);
  // A server hands every config the same store: a key created just before a reload is still shown once after it.
  const reveals = options.reveals ?? createKeyReveals(deps.now);

  /** The signed-in caller, or the response that turns them away. */
  async function guard(request: Request, need: { admin?: boolean } = {}): Promise<Guarded | Response> {
    const signed = await accounts.sessionUser(request);
    if (!signed) {
      // A form posted after the session ended goes back to its page, not to the POST-only action,
      // and the sign-in page says it was not acted on.
      const form = request.method !== "GET";
      const path = form ? formPage(requestPath(request.url)) : requestPath(request.url);
      const query = new URLSearchParams();
      if (path !== "/dashboard") query.set("next", path);
      if (form) query.set("error", "signed_out");
      return redirect(`/dashboard/signin${query.size > 0 ? `?${query}` : ""}`);
    }
    const guarded = { ...signed, csrf: csrfToken(signed.token) };
    if (need.admin && !signed.user.isAdmin) {
      return page(guarded, { title: "Not allowed", status: 403 }, html`<p class="card">This page is for administrators.</p>`);
    }
    return guarded;
  }

  /** guard() plus the checks every state-changing form gets. */
  async function guardForm(request: Request, body: unknown, need: { admin?: boolean } = {}): Promise<(Guarded & { form: Form }) | Response> {
    const g = await guard(request, need);
    if (g instanceof Response) return g;
    const form: Form = {};
    if (body && typeof body === "object") for (const [key, value] of Object.entries(body)) if (typeof value === "string") form[key] = value;
    if (!originAllowed(request, deps.config.server.public_url) || !verifyCsrf(g.token, form.csrf)) {
      return page(
        g,
        { title: "Form expired", status: 403 },
        html`<p class="card">This form was not sent from this dashboard, or your session changed since it was loaded. Go back, reload the page and try again.</p>`,
      );
    }
    return { ...g, form };
  }

  function page(g: Guarded, options: Omit<PageOptions, "user" | "csrf"> & { active?: NavKey }, body: Parameters<typeof renderPage>[1]): Response {
    return renderPage({ ...options, user: g.user, csrf: g.csrf }, body);
  }

  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard" })
    .get("/dashboard/assets/style.css", () => asset(STYLE, "text/css; charset=utf-8"), hidden)
    .get("/dashboard/assets/app.js", () => asset(SCRIPT, "text/javascript; charset=utf-8"), hidden)
    .use(authPageRoutes(deps, accounts))
    .get(
      "/dashboard",
      async ({ request }) => {
        const g = await guard(request);
        return g instanceof Response ? g : redirect("/dashboard/keys");
      },
      hidden,
    )
    .get(
      "/dashboard/models",
      async ({ request }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        return page(g, { title: "Models", active: "models" }, modelsPage(deps.registry, deps.now()));
      },
      hidden,
    )
    .get(
      "/dashboard/playground",
      async ({ request, query }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        return page(
          g,
          { title: "Playground", active: "playground" },
          playgroundPage(deps.registry, { model: typeof query.model === "string" ? query.model : undefined }),
        );
      },
      hidden,
    )
    .use(keyRoutes({ deps, accounts, reveals, guard, guardForm, page }))
    .use(usageRoutes({ deps, guard, page }))
    .get(
      "/dashboard/usage",
      async ({ request }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        const now = deps.now();
        const since = (Math.floor(now / 86_400_000) - USAGE_DAYS + 1) * 86_400_000;
        const view = {
          balanceMicro: await accounts.balance(g.user.id),
          daily: await dailyUsage(deps.db, { userId: g.user.id, since }),
          recent: await recentRequests(deps.db, { userId: g.user.id, limit: 50 }),
          now,
          isAdmin: g.user.isAdmin,
        };
        return page(g, { title: "Credits & usage", active: "usage" }, usagePage(view));
      },
      hidden,
    )
    .use(adminRoutes({ deps, accounts, guard, guardForm, page }))
    .get(
      "/dashboard/alerts",
      async ({ request, query }) => {
        const g = await guard(request, { admin: true });
        if (g instanceof Response) return g;
        const notice = query.done === "retry" ? { kind: "ok" as const, text: "The dead deliveries will be sent again." } : null;
        return page(g, { title: "Alerts", active: "alerts", notice }, alertsPage(await recentAlerts(deps.db), g.csrf));
      },
      hidden,
    )
    .post(
      "/dashboard/alerts/:id/retry",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        const id = idOf(params.id);
        if (id === null || (await retryDeliveries(deps.db, id, deps.now())) === 0) {
          return page(
            g,
            { title: "Alerts", active: "alerts", status: 404, notice: { kind: "error", text: "That alert has no dead delivery." } },
            alertsPage(await recentAlerts(deps.db), g.csrf),
          );
        }
        return redirect("/dashboard/alerts?done=retry");
      },
      hidden,
    )
    .get(
      "/dashboard/*",
      async ({ request }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        return page(g, { title: "Not found", status: 404 }, html`<p class="card">There is no such page. <a href="/dashboard">Back to the dashboard</a>.</p>`);
      },
      hidden,
    );
}

function asset(text: string, type: string): Response {
  return new Response(text, { headers: { "content-type": type, "cache-control": "public, max-age=31536000, immutable", "x-content-type-options": "nosniff" } });
}

/** The page a dashboard form is on, from the path it posts to (`/dashboard/admin/credits` is on /dashboard/admin). */
function formPage(action: string): string {
  if (action.startsWith("/dashboard/alerts")) return "/dashboard/alerts";
  return action.startsWith("/dashboard/admin") ? "/dashboard/admin" : "/dashboard/keys";
}
