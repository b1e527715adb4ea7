/**
 * The request log: a filter form (key, model, endpoint, status, time) and one page of rows, newest
 * first, with a link to the next page. Metadata only: the gateway never stores prompts or answers.
 */
import { displayCredits, formatNumber, html, time, type Html } from "../html";
import type { RequestLogRow } from "../request-log-query";

export interface RequestsView {
  rows: RequestLogRow[];
  /** The id to continue from, when there is a next page. */
  nextBefore: number | null;
  /** The filter as typed (query parameters), echoed in the form and the next page's link. */
  query: Record<string, string>;
  keys: Array<{ id: string; name: string; displayPrefix: string }>;
  showUser: boolean;
  isAdmin: boolean;
}

export function requestsPage(view: RequestsView): Html {
  const q = view.query;
  const next = new URLSearchParams({ ...q, before: String(view.nextBefore ?? "") });
  const csv = new URLSearchParams(Object.entries(q).filter(([k]) => k !== "before"));
  return html`<form method="get" action="/dashboard/requests" class="row card" id="request-filter" aria-label="Filter requests">
  ${view.showUser ? html`<input type="hidden" name="scope" value="${q.scope ?? ""}">` : ""}
  <div><label for="f-key">Key</label><select id="f-key" name="key"><option value="">any</option>${view.keys.map((k) => html`<option value="${k.id}"${k.id === q.key ? html` selected` : ""}>${k.name} (${k.displayPrefix}…)</option>`)}</select></div>
  <div><label for="f-model">Model</label><input id="f-model" name="model" type="text" value="${q.model ?? ""}" placeholder="any"></div>
  <div><label for="f-endpoint">Endpoint</label><input id="f-endpoint" name="endpoint" type="text" value="${q.endpoint ?? ""}" placeholder="chat"></div>
  <div><label for="f-status">Status</label><input id="f-status" name="status" type="text" value="${q.status ?? ""}" placeholder="2xx, 4xx, 429"></div>
  <div><label for="f-from">From <span class="hint">UTC</span></label><input id="f-from" name="from" type="date" value="${q.from ?? ""}"></div>
  <div><label for="f-to">To <span class="hint">UTC, inclusive</span></label><input id="f-to" name="to" type="date" value="${q.to ?? ""}"></div>
  <div class="shrink"><button type="submit">Filter</button></div>
</form>
<p><a href="/dashboard/usage.csv?${csv.toString()}" download id="requests-csv">Download these as CSV</a>${view.isAdmin ? html` · ${view.showUser ? html`<a href="/dashboard/requests">Only mine</a>` : html`<a href="/dashboard/requests?scope=all">Everyone's requests</a>`}` : ""}</p>
${
  view.rows.length === 0
    ? html`<p class="muted" id="requests-empty">No requests match.</p>`
    : html`<div class="table-wrap"><table id="requests">
  <thead><tr><th>Time</th>${view.showUser ? html`<th>User</th>` : ""}<th>Key</th><th>Model</th><th>Endpoint</th><th class="num">Status</th><th class="num">Tokens (in + out)</th><th class="num">Credits</th><th class="num">Latency</th><th>Request id</th></tr></thead>
  <tbody>${view.rows.map(
    (r) => html`<tr>
    <td>${time(r.createdAt)}</td>${view.showUser ? html`<td class="whole">${r.email ?? "anonymous"}</td>` : ""}
    <td class="whole">${r.keyName === null ? "-" : html`${r.keyName} <code>${r.keyPrefix}…</code>`}</td>
    <td class="whole">${r.model}</td><td>${r.endpoint}</td>
    <td class="num"><span class="badge ${r.status < 400 ? "ok" : "bad"}">${r.status}</span></td>
    <td class="num">${formatNumber(r.promptTokens)} + ${formatNumber(r.completionTokens)}</td>
    <td class="num">${displayCredits(r.costMicro)}</td><td class="num">${formatNumber(r.latencyMs)} ms</td><td><code>${r.requestId}</code></td>
  </tr>`,
  )}</tbody>
</table></div>`
}
${view.nextBefore === null ? "" : html`<p><a href="/dashboard/requests?${next.toString()}" id="requests-next">Older requests →</a></p>`}`;
}
