/**
 * The dashboard's admin pages: GET /dashboard/admin (users, keys, the outbox, the credit grant form)
 * and its forms (create, disable, enable or verify a user; grant credits; revoke a key or change its
 * policy). Each answers a refused form with the page and the form as sent, and a done one with a
 * redirect to the page and a notice. The guards are the dashboard's own (./index.ts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import type { DashboardAccounts } from "./accounts";
import { redirect, type NavKey, type PageOptions, type renderPage } from "./layout";
import { adminPage, type AdminView } from "./pages/admin";
import { policyFlagsOf, policyMessage } from "./pages/key-policy";
import { parsePolicyFlags } from "../auth/key-policy";
import { AMOUNT_RULE, parseCredits } from "../credits/amount";
import type { Form, Guarded } from "./accounts";

interface AdminRoutesDeps {
  deps: AppDeps;
  accounts: DashboardAccounts;
  guard(request: Request, need: { admin?: boolean }): Promise<Guarded | Response>;
  guardForm(request: Request, body: unknown, need: { admin?: boolean }): Promise<(Guarded & { form: Form }) | Response>;
  page(g: Guarded, options: Omit<PageOptions, "user" | "csrf"> & { active?: NavKey }, body: Parameters<typeof renderPage>[1]): Response;
}

export function adminRoutes({ deps, accounts, guard, guardForm, page }: AdminRoutesDeps) {
  /** `sent`: a refused form as it was sent, shown again (or the user just granted to). */
  async function renderAdmin(
    g: Guarded,
    notice: PageOptions["notice"] = null,
    status = 200,
    sent: Partial<Pick<AdminView, "grant" | "newUser">> = {},
  ): Promise<Response> {
    const oauth = deps.config.auth.github !== undefined || deps.config.auth.google !== undefined;
    const view = {
      users: await accounts.listUsers(),
      keys: await accounts.listKeys({}),
      outbox: await accounts.outbox(),
      csrf: g.csrf,
      now: deps.now(),
      selfId: g.user.id,
      oauth,
      grant: sent.grant ?? null,
      newUser: sent.newUser ?? null,
    };
    return page(g, { title: "Admin", active: "admin", notice, status }, adminPage(view));
  }

  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard.admin" })
    .get(
      "/dashboard/admin",
      async ({ request, query }) => {
        const g = await guard(request, { admin: true });
        if (g instanceof Response) return g;
        const notice =
          typeof query.done === "string" ? { kind: "ok" as const, text: Object.hasOwn(ADMIN_NOTICES, query.done) ? ADMIN_NOTICES[query.done] : "Done." } : null;
        // After a grant, the user granted to stays picked: grants to several users in a row must not fall back to the first (an admin).
        const grantedTo = query.done === "credits" && typeof query.user === "string" ? query.user : null;
        return renderAdmin(g, notice, 200, grantedTo === null ? {} : { grant: { userId: grantedTo, amount: "", note: "" } });
      },
      hidden,
    )
    .post(
      "/dashboard/admin/users",
      async ({ request, body }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        const email = (g.form.email ?? "").trim();
        const password = g.form.password ?? "";
        const isAdmin = g.form.admin === "1";
        const created = await accounts.createUser({ email, password: password === "" ? null : password, isAdmin });
        // The form comes back as sent, but for the password.
        if (!created.ok) return renderAdmin(g, { kind: "error", text: created.message }, 400, { newUser: { email: g.form.email ?? "", admin: isAdmin } });
        return redirect("/dashboard/admin?done=user");
      },
      hidden,
    )
    .post(
      "/dashboard/admin/users/:id/:action",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        const userId = idOf(params.id);
        const action = params.action;
        if (userId === null || (action !== "disable" && action !== "enable" && action !== "verify"))
          return renderAdmin(g, { kind: "error", text: "Unknown action." }, 404);
        if (action === "verify") {
          const proven = await accounts.proveEmail(userId);
          if (proven === "not_found") return renderAdmin(g, { kind: "error", text: "No such user." }, 404);
          return redirect(`/dashboard/admin?done=${proven === "proven" ? "verify" : "already_proven"}`);
        }
        if (userId === g.user.id) return renderAdmin(g, { kind: "error", text: "You cannot disable yourself." }, 400);
        if (!(await accounts.setUserDisabled(userId, { disabled: action === "disable" }))) return renderAdmin(g, { kind: "error", text: "No such user." }, 404);
        return redirect(`/dashboard/admin?done=${action}`);
      },
      hidden,
    )
    .post(
      "/dashboard/admin/credits",
      async ({ request, body }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        const userId = idOf(g.form.user_id ?? "");
        const micro = parseCredits(g.form.amount ?? "");
        // A refused grant shows its form as it was sent: a user picked again by default is the wrong one.
        const sent = { userId: g.form.user_id ?? "", amount: g.form.amount ?? "", note: g.form.note ?? "" };
        if (userId === null || micro === null) {
          return renderAdmin(g, { kind: "error", text: `Pick a user and an amount such as 12.50: ${AMOUNT_RULE}.` }, 400, { grant: sent });
        }
        const granted = await accounts.grantCredits({ userId, micro, note: g.form.note || null });
        if (!granted.ok) return renderAdmin(g, { kind: "error", text: granted.message }, 400, { grant: sent });
        return redirect(`/dashboard/admin?done=credits&user=${userId}`);
      },
      hidden,
    )
    .post(
      "/dashboard/admin/keys/:id/revoke",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        if (!(await accounts.revokeKey(params.id, {}))) return renderAdmin(g, { kind: "error", text: "No such active key." }, 404);
        return redirect("/dashboard/admin?done=revoked");
      },
      hidden,
    )
    .post(
      "/dashboard/admin/keys/:id/policy",
      async ({ request, body, params }) => {
        const g = await guardForm(request, body, { admin: true });
        if (g instanceof Response) return g;
        const change = parsePolicyFlags(policyFlagsOf(g.form));
        if ("error" in change) return renderAdmin(g, { kind: "error", text: policyMessage(change.error) }, 400);
        if (!(await accounts.updateKeyPolicy(params.id, change, {}))) return renderAdmin(g, { kind: "error", text: "No such key." }, 404);
        return redirect("/dashboard/admin?done=policy");
      },
      hidden,
    );
}

const ADMIN_NOTICES: Record<string, string> = {
  user: "The user was created.",
  disable: "The user was disabled.",
  enable: "The user was enabled.",
  verify: "The address was marked proven.",
  already_proven: "The address was already proven; nothing changed.",
  credits: "Credits granted.",
  revoked: "The key was revoked.",
  policy: "The key's policy was saved; it applies from the key's next request.",
};

/** A user (or alert) id as the admin forms write it (decimal digits, no sign or spaces), else null. */
export function idOf(text: string): number | null {
  return /^[1-9][0-9]{0,14}$/.test(text) ? Number(text) : null;
}
