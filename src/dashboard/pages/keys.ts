/**
 * API keys: the caller's keys (name, display prefix, created, expires, last used, status, policy
 * and spend, with a form to edit the policy), a create form with an optional expiry and policy, the full key shown exactly once right after creation
 * (with a copy button and a warning), and soft revocation behind a confirmation. Revoked and
 * expired keys stay listed with their status. Shared with the admin page's all-keys table.
 */
import { html, time, type Html } from "../html";
import { KEY_NAME_MAX_CHARS, keyState } from "../../auth/apikey";
import { policyCell, policyEditForm, policyInputs, type KeySpendView } from "./key-policy";

export interface KeyView extends KeySpendView {
  id: string;
  name: string;
  displayPrefix: string;
  createdAt: number;
  expiresAt: number | null;
  lastUsedAt: number | null;
  revokedAt: number | null;
  ownerDisabledAt: number | null;
  ownerEmail?: string;
}

export const EXPIRY_CHOICES: Array<{ value: string; label: string; days: number | null }> = [
  { value: "never", label: "Never", days: null },
  { value: "7d", label: "In 7 days", days: 7 },
  { value: "30d", label: "In 30 days", days: 30 },
  { value: "90d", label: "In 90 days", days: 90 },
  { value: "365d", label: "In a year", days: 365 },
];

const STATE_BADGE = { revoked: "bad", expired: "warn", "owner disabled": "bad", active: "ok" } as const;

function keyStatus(key: KeyView, now: number): { label: string; kind: string } {
  const state = keyState(key, now);
  return { label: state, kind: STATE_BADGE[state] };
}

export function keysPage(view: {
  keys: KeyView[];
  csrf: string;
  now: number;
  created?: { key: string; name: string } | null;
  /** A refused create form as it was sent, shown again. */
  sent?: ({ name: string; expires: string } & Record<string, string>) | null;
}): Html {
  // maxlength counts UTF-16 units (an emoji is two); the server's limit counts characters.
  return html`${view.created ? createdKey(view.created) : ""}
<section class="card" aria-labelledby="create-h">
  <h2 id="create-h">Create a key</h2>
  <form method="post" action="/dashboard/keys" class="row">
    <input type="hidden" name="csrf" value="${view.csrf}">
    <div><label for="key-name">Name <span class="hint">up to ${KEY_NAME_MAX_CHARS} characters</span></label><input id="key-name" name="name" type="text" required maxlength="${KEY_NAME_MAX_CHARS * 2}" placeholder="laptop, CI, my-app" autocomplete="off" value="${view.sent?.name ?? ""}"></div>
    <div><label for="key-expires">Expires</label><select id="key-expires" name="expires">${EXPIRY_CHOICES.map((c) => html`<option value="${c.value}"${c.value === view.sent?.expires ? html` selected` : ""}>${c.label}</option>`)}</select></div>
    <div class="shrink"><button type="submit">Create key</button></div>
    <details class="policy-new"${view.sent?.policy ? html` open` : ""}><summary>Policy (optional): models, budget, limits, addresses</summary>
      <div class="row">${policyInputs("key", view.sent ?? {})}</div></details>
  </form>
</section>
<h2>Your keys</h2>
${keysTable(view.keys, { csrf: view.csrf, now: view.now, revokeAction: (id) => `/dashboard/keys/${encodeURIComponent(id)}/revoke`, policyAction: (id) => `/dashboard/keys/${encodeURIComponent(id)}/policy` })}`;
}

function createdKey(created: { key: string; name: string }): Html {
  return html`<section class="card secret" aria-labelledby="new-key-h" id="new-key-card">
  <h2 id="new-key-h">Your new key “${created.name}”</h2>
  <p><strong>Copy it now. It will not be shown again</strong>: modelgate keeps only a hash of it. If you lose it, revoke it and create another.</p>
  <div class="key"><label for="new-key" class="hint">API key</label>
    <input id="new-key" type="text" readonly value="${created.key}" aria-describedby="new-key-h">
    <button type="button" data-copy="#new-key">Copy</button></div>
</section>`;
}

export function keysTable(
  keys: KeyView[],
  options: { csrf: string; now: number; revokeAction: (id: string) => string; policyAction: (id: string) => string; showOwner?: boolean },
): Html {
  if (keys.length === 0) return html`<p class="muted" id="keys-empty">No keys yet.</p>`;
  return html`<div class="table-wrap"><table id="keys" class="actions">
  <thead><tr>${options.showOwner ? html`<th>Owner</th>` : ""}<th>Name</th><th>Key</th><th>Created</th><th>Expires</th><th>Last used</th><th>Status</th><th>Policy and spend</th><th><span class="hint">Action</span></th></tr></thead>
  <tbody>${keys.map((k) => {
    const status = keyStatus(k, options.now);
    return html`<tr data-key-id="${k.id}" data-status="${status.label}" data-last-used="${k.lastUsedAt ?? ""}">
      ${options.showOwner ? html`<td class="whole">${k.ownerEmail ?? ""}</td>` : ""}
      <td class="whole">${k.name}</td>
      <td><code>${k.displayPrefix}…</code></td>
      <td>${time(k.createdAt)}</td>
      <td>${time(k.expiresAt, { empty: "never" })}</td>
      <td>${time(k.lastUsedAt, { empty: "never" })}</td>
      <td><span class="badge ${status.kind}">${status.label}</span>${k.revokedAt !== null ? html`<br><span class="hint">${time(k.revokedAt)}</span>` : ""}</td>
      <td class="whole">${policyCell(k)}${k.revokedAt === null ? policyEditForm(k, { csrf: options.csrf, action: options.policyAction(k.id) }) : ""}</td>
      <td>${
        k.revokedAt === null
          ? html`<form method="post" action="${options.revokeAction(k.id)}" data-confirm="Revoke the key “${k.name}”? Programs using it will get 401 from now on. This cannot be undone.">
            <input type="hidden" name="csrf" value="${options.csrf}">
            <button type="submit" class="danger" aria-label="Revoke key ${k.name}">Revoke</button></form>`
          : ""
      }</td>
    </tr>`;
  })}</tbody>
</table></div>`;
}
