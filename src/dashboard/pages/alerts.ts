/**
 * The Alerts page (administrators): the alert groups triage jobs received, newest first, each with
 * its status, what became of it, the model's summary (or why there is none), and each notify
 * target's delivery state, with a Retry button on a dead delivery. Held alerts are counted in
 * their digest's row rather than listed one by one (a storm must not bury the page).
 */
import type { Db } from "../../db/client";
import { html, time, type Html } from "../html";
import { recentAlerts as newestAlerts, type AlertRow } from "../../webhooks/triage/store";
import { deliveriesOf, type DeliveryRow } from "../../webhooks/triage/delivery-rows";

const PAGE = 100;

export interface AlertView {
  alert: AlertRow;
  deliveries: DeliveryRow[];
  held: number;
}

/** The newest alerts and their deliveries; none when the tables are empty (or triage never ran). */
export async function recentAlerts(db: Db): Promise<AlertView[]> {
  const { alerts, held } = await newestAlerts(db, PAGE);
  if (alerts.length === 0) return [];
  const deliveries = await deliveriesOf(
    db,
    alerts.map((a) => a.id),
  );
  return alerts.map((alert) => ({ alert, deliveries: deliveries.filter((d) => d.alert_id === alert.id), held: held.get(alert.id) ?? 0 }));
}

function delivery(d: DeliveryRow, csrf: string): Html {
  const badge = d.state === "sent" ? "ok" : d.state === "dead" ? "bad" : "";
  return html`<li><span class="badge ${badge}">${d.kind} ${d.state}</span>${d.attempts > 0 ? html` <span class="hint">${d.attempts} attempt(s)</span>` : ""}${d.last_error ? html` <span class="muted whole">${d.last_error}</span>` : ""}${
    d.state === "dead"
      ? html` <form method="post" action="/dashboard/alerts/${d.alert_id}/retry" class="inline"><input type="hidden" name="csrf" value="${csrf}"><button type="submit" aria-label="Retry the ${d.kind} delivery of alert ${d.alert_id}">Retry</button></form>`
      : ""
  }</li>`;
}

export function alertsPage(views: AlertView[], csrf: string): Html {
  if (views.length === 0)
    return html`<p class="muted card" id="alerts-empty">No alerts yet. A <code>triage</code> job (see the docs' Alert triage page) lists each alert group it receives here.</p>`;
  return html`<div class="table-wrap"><table id="alerts">
  <thead><tr><th>Received</th><th>Status</th><th>Alert</th><th>State</th><th>Summary</th><th>Deliveries</th></tr></thead>
  <tbody>${views.map(
    ({ alert: a, deliveries, held }) => html`<tr id="alert-${a.id}">
    <td>${time(a.created_at)}</td>
    <td><span class="badge ${a.status === "resolved" ? "ok" : a.status === "firing" ? "bad" : ""}">${a.status}</span>${a.severity ? html` <span class="hint">${a.severity}</span>` : ""}</td>
    <td class="whole">${a.title}<br><span class="hint">${a.kind} on ${a.path}</span></td>
    <td>${a.state}${a.state === "digest" ? html` <span class="hint">${held} alerts</span>` : ""}</td>
    <td class="whole">${a.summary ?? (a.summary_error ? html`<span class="muted">no summary: ${a.summary_error}</span>` : "")}</td>
    <td><ul class="plain">${deliveries.map((d) => delivery(d, csrf))}</ul></td>
  </tr>`,
  )}</tbody>
</table></div>`;
}
