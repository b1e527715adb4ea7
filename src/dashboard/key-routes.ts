/**
 * The dashboard's API keys page: GET /dashboard/keys (the caller's keys, and a key just created,
 * shown once: ./key-reveals.ts) and its forms (create a key, revoke one, change its policy). A
 * refused form comes back as it was sent; a done one redirects to the page with a notice, so a
 * reload cannot post it again. The guards are the dashboard's own (./index.ts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { KEY_NAME_MAX_CHARS, keyNameTooLong } from "../auth/apikey";
import { parsePolicyFlags } from "../auth/key-policy";
import type { DashboardAccounts, Form, Guarded } from "./accounts";
import type { CreatedKey, KeyReveals } from "./key-reveals";
import { redirect, type NavKey, type PageOptions, type renderPage } from "./layout";
import { EXPIRY_CHOICES, keysPage } from "./pages/keys";
import { policyFlagsOf, policyFormFields, policyMessage } from "./pages/key-policy";

interface KeyRoutesDeps {
  deps: AppDeps;
  accounts: DashboardAccounts;
  reveals: KeyReveals;
  guard(request: Request): Promise<Guarded | Response>;
  guardForm(request: Request, body: unknown): Promise<(Guarded & { form: Form }) | Response>;
  page(g: Guarded, options: Omit<PageOptions, "user" | "csrf"> & { active?: NavKey }, body: Parameters<typeof renderPage>[1]): Response;
}

export function keyRoutes({ deps, accounts, reveals, guard, guardForm, page }: KeyRoutesDeps) {
  async function renderKeys(
    g: Guarded,
    extra: {
      created?: CreatedKey | null;
      notice?: PageOptions["notice"];
      status?: number;
      sent?: { name: string; expires: string } & Record<string, string>;
    } = {},
  ): Promise<Response> {
    const now = deps.now();
    const keys = await accounts.listKeys({ userId: g.user.id });
    return page(
      g,
      { title: "API keys", active: "keys", notice: extra.notice, status: extra.status },
      keysPage({ keys, csrf: g.csrf, now, created: extra.created, sent: extra.sent }),
    );
  }

  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard.keys" })
    .get(
      "/dashboard/keys",
      async ({ request, query }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        if (typeof query.created === "string") {
          const created = reveals.take(query.created, g.csrf);
          if (created) return renderKeys(g, { created });
          return renderKeys(g, {
            notice: {
              kind: "error",
              text: "That new key cannot be shown: a key is shown once, within a minute of its creation, to the session that created it. If you did not copy it, revoke it and create another.",
            },
          });
        }
        const done = query.revoked ? "The key was revoked." : query.policy ? "The key's policy was saved; it applies from the key's next request." : null;
        return renderKeys(g, { notice: done === null ? null : { kind: "ok", text: done } });
      },
      hidden,
    )
    .post(
      "/dashboard/keys",
      async ({ request, body }) => {
        const g = await guardForm(request, body);
        if (g instanceof Response) return g;
        const name = (g.form.name ?? "").trim();
        const choice = EXPIRY_CHOICES.find((c) => c.value === g.form.expires);
        if (name.length === 0 || keyNameTooLong(name) || !choice) {
          // The form comes back as it was sent, to be shortened rather than typed again.
          const sent = { name: g.form.name ?? "", expires: g.form.expires ?? "" };
          return renderKeys(g, {
            notice: { kind: "error", text: `Give the key a name (up to ${KEY_NAME_MAX_CHARS} characters) and pick an expiry.` },
            status: 400,
            sent,
          });
        }
        const policy = parsePolicyFlags(policyFlagsOf(g.form));
        if ("error" in policy) {
          const sent = { ...policyFormFields(g.form), name: g.form.name ?? "", expires: g.form.expires ?? "", policy: "open" };
          return renderKeys(g, { notice: { kind: "error", text: policyMessage(policy.error) }, status: 400, sent });
        }
        const expiresAt = choice.days === null ? null : deps.now() + choice.days * 86_400_000;
        const created = await accounts.createKey({ userId: g.user.id, name, expiresAt, policy });
        if (!created.ok) return renderKeys(g, { notice: { kind: "error", text: created.message }, status: 400 });
        // Shown by the page redirected to, so that reloading it cannot post the form again.
        const id = reveals.hold(g.csrf, { key: created.value.key, name: created.value.name });
        return redirect(`/dashboard/keys?created=${id}`);
      },
      hidden,
    )
    .post(
      "/dashboard/keys/:id/revoke",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body);
        if (g instanceof Response) return g;
        if (!(await accounts.revokeKey(params.id, { userId: g.user.id }))) {
          return renderKeys(g, { notice: { kind: "error", text: "No such active key of yours." }, status: 404 });
        }
        return redirect("/dashboard/keys?revoked=1");
      },
      hidden,
    )
    .post(
      "/dashboard/keys/:id/policy",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body);
        if (g instanceof Response) return g;
        const change = parsePolicyFlags(policyFlagsOf(g.form));
        if ("error" in change) return renderKeys(g, { notice: { kind: "error", text: policyMessage(change.error) }, status: 400 });
        if (!(await accounts.updateKeyPolicy(params.id, change, { userId: g.user.id })))
          return renderKeys(g, { notice: { kind: "error", text: "No such key of yours." }, status: 404 });
        return redirect("/dashboard/keys?policy=1");
      },
      hidden,
    );
}
