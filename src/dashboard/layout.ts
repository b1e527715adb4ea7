/**
 * The page shell every dashboard page shares: document head, the navigation (admin link only for
 * admins), the signed-in user with a sign-out form, and a notice area. Pages are plain HTML with
 * one small stylesheet and one small script, both embedded in the binary; nothing else loads.
 * Every response is `no-store` (pages may show a freshly created key) and framing is denied.
 */
import { html, type Html, type Interpolation } from "./html";
import { ASSET_VERSION } from "./assets";

export interface PageUser {
  id: number;
  email: string;
  isAdmin: boolean;
}

export type NavKey = "keys" | "usage" | "requests" | "models" | "playground" | "alerts" | "admin";

export interface PageOptions {
  title: string;
  user: PageUser | null;
  active?: NavKey;
  /** The per-session CSRF token for the sign-out form. */
  csrf?: string;
  notice?: { kind: "ok" | "error"; text: string } | null;
  status?: number;
}

const NAV: Array<{ key: NavKey; href: string; label: string; admin?: boolean }> = [
  { key: "keys", href: "/dashboard/keys", label: "API keys" },
  { key: "usage", href: "/dashboard/usage", label: "Credits & usage" },
  { key: "requests", href: "/dashboard/requests", label: "Request log" },
  { key: "models", href: "/dashboard/models", label: "Models" },
  { key: "playground", href: "/dashboard/playground", label: "Playground" },
  { key: "alerts", href: "/dashboard/alerts", label: "Alerts", admin: true },
  { key: "admin", href: "/dashboard/admin", label: "Admin", admin: true },
];

const SECURITY_HEADERS: Record<string, string> = {
  "cache-control": "no-store",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "referrer-policy": "same-origin",
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

export function renderPage(options: PageOptions, body: Interpolation): Response {
  const { user } = options;
  const nav = user
    ? html`<nav aria-label="Main"><ul>${NAV.filter((n) => !n.admin || user.isAdmin).map(
        (n) => html`<li><a href="${n.href}"${n.key === options.active ? html` aria-current="page"` : ""}>${n.label}</a></li>`,
      )}</ul></nav>
      <form class="signout" method="post" action="/dashboard/signout">
        <span class="who" title="Signed in">${user.email}${user.isAdmin ? html` <span class="badge">admin</span>` : ""}</span>
        <input type="hidden" name="csrf" value="${options.csrf ?? ""}">
        <button type="submit" class="link">Sign out</button>
      </form>`
    : "";
  const notice = options.notice
    ? html`<p class="notice ${options.notice.kind}" role="${options.notice.kind === "error" ? "alert" : "status"}">${options.notice.text}</p>`
    : "";
  const doc = html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${options.title} · modelgate</title>
<link rel="stylesheet" href="/dashboard/assets/style.css?v=${ASSET_VERSION}">
<link rel="icon" href="data:,">
<script src="/dashboard/assets/app.js?v=${ASSET_VERSION}" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
  <a class="brand" href="/dashboard">modelgate</a>
  ${nav}
</header>
<main id="main"${user ? "" : html` class="signed-out"`}>
<h1>${options.title}</h1>
${notice}
${body}
</main>
</body>
</html>`;
  return htmlResponse(doc, options.status ?? 200);
}

function htmlResponse(doc: Html, status: number): Response {
  return new Response(doc.value, {
    status,
    headers: { "content-type": "text/html; charset=utf-8", ...SECURITY_HEADERS },
  });
}

export function redirect(location: string): Response {
  return new Response(null, { status: 303, headers: { location, "cache-control": "no-store" } });
}
