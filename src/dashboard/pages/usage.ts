/**
 * Credits & usage: the balance, three stacked charts (requests, tokens, credits spent per day for
 * the last 30 days, one colour per model), a table of the most recent requests, and the CSV
 * download (../usage-routes.ts).
 */
import { barChart, lastDays, type ChartSeries } from "../chart";
import { displayCredits, formatNumber, html, time, type Html } from "../html";
import type { DailyUsageRow, RecentRequest } from "../usage-query";

export const USAGE_DAYS = 30;

export interface UsageView {
  balanceMicro: number;
  daily: DailyUsageRow[];
  recent: RecentRequest[];
  now: number;
  /** An administrator also gets everyone's usage as CSV. */
  isAdmin: boolean;
}

export function usagePage(view: UsageView): Html {
  const days = lastDays(view.now, USAGE_DAYS);
  const index = new Map(days.map((d, i) => [d, i]));
  const models = [...new Set(view.daily.map((r) => r.model))].sort();
  const series = (pick: (r: DailyUsageRow) => number): ChartSeries[] =>
    models.map((model) => {
      const values = new Array<number>(days.length).fill(0);
      for (const r of view.daily) {
        const i = index.get(r.day);
        if (r.model === model && i !== undefined) values[i] += pick(r);
      }
      return { name: model, values };
    });
  const balanceClass = view.balanceMicro > 0 ? "" : " bad";
  return html`<section class="card" aria-labelledby="balance-h">
  <h2 id="balance-h">Balance</h2>
  <p class="stat${balanceClass}" id="balance" data-micro="${view.balanceMicro}">${displayCredits(view.balanceMicro)} <span class="unit">credits</span></p>
  ${view.balanceMicro <= 0 ? html`<p class="muted">Paid models answer 402 until an admin grants credits; free models still work.</p>` : ""}
</section>
<p class="row" id="usage-downloads"><a href="/dashboard/usage.csv" download id="usage-csv">Download CSV</a>${view.isAdmin ? html` <a href="/dashboard/usage.csv?scope=all" download id="usage-csv-all">Download everyone's CSV</a>` : ""} <a href="/dashboard/requests">Request log</a></p>
<h2>Last ${USAGE_DAYS} days</h2>
<div class="grid">
  ${barChart({ id: "chart-requests", title: "Requests", days, series: series((r) => r.requests), format: (n) => formatNumber(Math.round(n)) })}
  ${barChart({ id: "chart-tokens", title: "Tokens", days, series: series((r) => r.tokens), format: (n) => formatNumber(Math.round(n)) })}
  ${barChart({ id: "chart-credits", title: "Credits spent", days, series: series((r) => r.costMicro), format: (n) => displayCredits(Math.round(n)), axisScale: 1_000_000 })}
</div>
<h2>Recent requests</h2>
${
  view.recent.length === 0
    ? html`<p class="muted">No requests yet. Try the <a href="/dashboard/playground">playground</a>.</p>`
    : html`<div class="table-wrap"><table id="recent">
  <thead><tr><th>Time</th><th>Model</th><th>Via</th><th class="num">Tokens (in + out)</th><th class="num">Cost</th><th class="num">Status</th><th class="num">Latency</th></tr></thead>
  <tbody>${view.recent.map(
    (r) => html`<tr>
    <td>${time(r.createdAt)}</td>
    <td class="whole">${r.model}</td>
    <td>${r.identity === "api_key" ? html`key <em class="whole">${r.keyName ?? r.keyId ?? ""}</em>` : r.identity}</td>
    <td class="num">${formatNumber(r.promptTokens)} + ${formatNumber(r.completionTokens)}</td>
    <td class="num">${displayCredits(r.costMicro)}</td>
    <td class="num"><span class="badge ${r.status < 400 ? "ok" : "bad"}">${r.status}</span></td>
    <td class="num">${formatNumber(r.latencyMs)} ms</td>
  </tr>`,
  )}</tbody>
</table></div>`
}`;
}
