/**
 * Admin (admins only): users with their balance and status (create, disable, enable, mark an
 * unproven address proven), a credit grant form, every key with revoke, and the webhook outbox
 * when the webhooks part exposes it.
 */
import { emailInput, displayCredits, formatNumber, html, raw, time, type Html } from "../html";
import { keysTable, type KeyView } from "./keys";

export interface UserView {
  id: number;
  email: string;
  isAdmin: boolean;
  /** Signed up with a password, and nobody vouched for the address yet (see `user verify`). */
  emailUnverified: boolean;
  disabledAt: number | null;
  createdAt: number;
  balanceMicro: number;
}

export interface OutboxView {
  counts: Record<string, number>;
  recent: Array<{ callId: number; jobId: number; path: string; state: string; attempts: number; createdAt: number; lastError: string | null }>;
}

export interface AdminView {
  users: UserView[];
  keys: KeyView[];
  outbox: OutboxView | null;
  csrf: string;
  now: number;
  selfId: number;
  /** GitHub or Google sign-in is configured: a user may then be made without a password. */
  oauth: boolean;
  /** A refused grant's form as it was sent, shown again, or the user just granted to; null for a fresh one. */
  grant: { userId: string; amount: string; note: string } | null;
  /** A refused "Create a user" form as it was sent (never its password), or null. */
  newUser: { email: string; admin: boolean } | null;
}

export function adminPage(view: AdminView): Html {
  const csrf = html`<input type="hidden" name="csrf" value="${view.csrf}">`;
  return html`<section aria-labelledby="users-h">
<h2 id="users-h">Users</h2>
<div class="table-wrap"><table id="users" class="actions">
  <thead><tr><th>Email</th><th>Role</th><th>Status</th><th class="num">Balance</th><th>Created</th><th><span class="hint">Action</span></th></tr></thead>
  <tbody>${view.users.map(
    (u) => html`<tr data-user="${u.email}">
    <td class="whole">${u.email}</td>
    <td>${u.isAdmin ? html`<span class="badge">admin</span>` : "user"}</td>
    <td>${u.disabledAt === null ? html`<span class="badge ok">active</span>` : html`<span class="badge bad">disabled</span>`}${u.emailUnverified ? html` <span class="badge" title="Signed up with a password: nothing proves the address">unproven</span>` : ""}</td>
    <td class="num" data-balance="${u.balanceMicro}">${displayCredits(u.balanceMicro)}</td>
    <td>${time(u.createdAt)}</td>
    <td>${
      u.id === view.selfId
        ? html`<span class="hint">you</span>`
        : u.disabledAt === null
          ? html`<form method="post" action="/dashboard/admin/users/${u.id}/disable" data-confirm="Disable ${u.email}? Their sessions end and their keys stop working until re-enabled.">${csrf}<button type="submit" class="danger" aria-label="Disable ${u.email}">Disable</button></form>`
          : html`<form method="post" action="/dashboard/admin/users/${u.id}/enable">${csrf}<button type="submit" class="secondary" aria-label="Enable ${u.email}">Enable</button></form>`
    }${u.emailUnverified ? proveForm(u, csrf) : ""}</td>
  </tr>`,
  )}</tbody>
</table></div>
</section>
<div class="grid">
<section class="card" aria-labelledby="create-user-h">
  <h2 id="create-user-h">Create a user</h2>
  <form method="post" action="/dashboard/admin/users">${csrf}
    <label for="new-email">Email</label>${emailInput("new-email", { autocomplete: "off", value: view.newUser?.email })}
    <label for="new-password">Password <span class="hint">at least 8 characters; ${view.oauth ? "leave empty for sign-in with GitHub or Google only" : "leave empty for an account that only holds API keys (made with modelgate key create)"}</span></label>
    <input id="new-password" name="password" type="password" minlength="8" autocomplete="new-password">
    <label><input type="checkbox" name="admin" value="1"${view.newUser?.admin ? raw(" checked") : ""}> Administrator</label>
    <button type="submit">Create user</button>
  </form>
</section>
<section class="card" aria-labelledby="grant-h">
  <h2 id="grant-h">Grant credits</h2>
  <form method="post" action="/dashboard/admin/credits" id="grant-form">${csrf}
    <label for="grant-user">User</label>
    <select id="grant-user" name="user_id" required>${view.users.map((u) => html`<option value="${u.id}"${String(u.id) === view.grant?.userId ? html` selected` : ""}>${u.email}</option>`)}</select>
    <label for="grant-amount">Amount <span class="hint">credits, up to 6 decimals</span></label>
    <input id="grant-amount" name="amount" type="text" inputmode="decimal" required pattern="[0-9]+(\\.[0-9]{1,6})?" placeholder="12.50" value="${view.grant?.amount ?? ""}">
    <label for="grant-note">Note <span class="hint">optional, kept in the ledger</span></label>
    <input id="grant-note" name="note" type="text" maxlength="200" value="${view.grant?.note ?? ""}">
    <button type="submit">Grant</button>
  </form>
</section>
</div>
<section aria-labelledby="all-keys-h">
<h2 id="all-keys-h">All keys</h2>
${keysTable(view.keys, { csrf: view.csrf, now: view.now, showOwner: true, revokeAction: (id) => `/dashboard/admin/keys/${encodeURIComponent(id)}/revoke`, policyAction: (id) => `/dashboard/admin/keys/${encodeURIComponent(id)}/policy` })}
</section>
${view.outbox ? outboxSection(view.outbox) : ""}`;
}

/** Only for an address whose owner proved it to the admin: GitHub or Google sign-in with it then joins this account, and setup or --admin accept it. */
function proveForm(u: UserView, csrf: Html): Html {
  return html`<form method="post" action="/dashboard/admin/users/${u.id}/verify" data-confirm="Mark ${u.email} as proven? Only if its owner proved the address to you: GitHub or Google sign-in with it will then join this account.">${csrf}<button type="submit" class="secondary" aria-label="Mark ${u.email} proven">Mark proven</button></form>`;
}

function outboxSection(outbox: OutboxView): Html {
  const states = Object.entries(outbox.counts);
  return html`<section aria-labelledby="outbox-h">
<h2 id="outbox-h">Webhook outbox</h2>
<p>${states.map(([state, n]) => html`<span class="badge ${state === "dead" && n > 0 ? "bad" : ""}">${state}: ${formatNumber(n)}</span> `)}</p>
${
  outbox.recent.length === 0
    ? html`<p class="muted">No webhook calls yet.</p>`
    : html`<div class="table-wrap"><table id="outbox">
  <thead><tr><th class="num">Call</th><th class="num">Job</th><th>Path</th><th>State</th><th class="num">Attempts</th><th>Received</th><th>Last error</th></tr></thead>
  <tbody>${outbox.recent.map((j) => html`<tr><td class="num">${j.callId}</td><td class="num">${j.jobId}</td><td><code>${j.path}</code></td><td>${j.state}</td><td class="num">${j.attempts}</td><td>${time(j.createdAt)}</td><td>${j.lastError ?? ""}</td></tr>`)}</tbody>
</table></div>`
}
</section>`;
}
