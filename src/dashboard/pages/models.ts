/**
 * The Models page: every route the gateway serves (configured and discovered) with its price,
 * free-tier badge, strategy and the health of each upstream target, straight from the live
 * registry. Read-only; any signed-in user may see it.
 */
import type { ModelRegistry, ModelRoute } from "../../router/registry";
import type { CircuitState } from "../../router/circuit";
import { upstreamHealth } from "../../router/upstream-health";
import { targetState } from "../../router/target-state";
import { html, type Html } from "../html";

const STATE: Record<CircuitState, { label: string; kind: string }> = {
  closed: { label: "healthy", kind: "ok" },
  "half-open": { label: "probing", kind: "warn" },
  open: { label: "cooling down", kind: "bad" },
};

export function modelsPage(registry: ModelRegistry, now: number): Html {
  const routes = registry.list();
  if (routes.length === 0) {
    return html`<p class="card">No models are configured. Add <code>[[models]]</code> to the config, or set <code>discover = true</code> on an upstream.</p>`;
  }
  const upstreams = [...registry.upstreams.values()].map((u) => upstreamHealth(u, now));
  return html`<p class="muted">Prices are in credits per 1M tokens. Free models may be called without credentials.</p>
<div class="table-wrap"><table id="models">
  <thead><tr><th>Model</th><th>Tier</th><th class="num">Prompt</th><th class="num">Completion</th><th>Upstreams</th></tr></thead>
  <tbody>${routes.map((route) => modelRow(route, now))}</tbody>
</table></div>
<h2>Upstreams</h2>
<div class="table-wrap"><table id="upstreams">
  <thead><tr><th>Upstream</th><th>State</th><th class="num">Failures in a row</th><th class="num">Time to first byte</th><th>Last error</th></tr></thead>
  <tbody>${upstreams.map(
    (u) => html`<tr>
    <td class="whole">${u.name}</td>
    <td><span class="badge ${STATE[u.state].kind}">${STATE[u.state].label}</span></td>
    <td class="num">${u.consecutive_failures}</td>
    <td class="num">${u.ttfb_ms === null ? "–" : `${u.ttfb_ms} ms`}</td>
    <td>${u.last_error ?? html`<span class="muted">none</span>`}</td>
  </tr>`,
  )}</tbody>
</table></div>`;
}

function modelRow(route: ModelRoute, now: number): Html {
  const targets = route.targets.map((t) => {
    const state = targetState(t, now);
    return html`<span class="badge ${STATE[state].kind}" title="${t.upstream.name} → ${t.model}: ${STATE[state].label}">${t.upstream.name}</span> `;
  });
  return html`<tr data-model="${route.id}">
    <td><strong class="whole">${route.id}</strong>${route.aliases.length ? html`<br><span class="muted">also ${route.aliases.join(", ")}</span>` : ""}${route.source === "discovered" ? html` <span class="badge">discovered</span>` : ""}</td>
    <td>${route.free ? html`<span class="badge ok">free</span>` : html`<span class="badge">paid</span>`}</td>
    <td class="num">${route.price.prompt}</td>
    <td class="num">${route.price.completion}</td>
    <td>${targets}${route.targets.length > 1 ? html`<span class="muted">${route.strategy}</span>` : ""}</td>
  </tr>`;
}
