/**
 * A stacked bar chart rendered server-side as plain SVG: one bar per day, a colour per model,
 * a legend, a hover title on every segment, and the numbers again in a collapsible table for
 * screen readers and copy-paste. No client code, no library, nothing to load.
 * Invariant: every label is escaped (model names come from config and upstreams).
 */
import { html, raw, type Html } from "./html";

export interface ChartSeries {
  name: string;
  /** One value per day, aligned with `days`. */
  values: number[];
}

export interface BarChartOptions {
  id: string;
  title: string;
  /** UTC dates, YYYY-MM-DD, oldest first. */
  days: string[];
  series: ChartSeries[];
  format: (value: number) => string;
  /** The axis shows value / axisScale, compact (credits are charted in micro-credits); default 1. */
  axisScale?: number;
}

const WIDTH = 360;
const HEIGHT = 170;
const PAD = { top: 10, right: 6, bottom: 22, left: 50 };
/** Colours, by class (the stylesheet's; no inline styles): series past the eighth repeat them. */
const COLOURS = 8;
const AXIS = new Intl.NumberFormat("en", { notation: "compact", maximumSignificantDigits: 3 });

export function barChart(options: BarChartOptions): Html {
  const { days, series, format } = options;
  const totals = days.map((_, i) => series.reduce((sum, s) => sum + (s.values[i] ?? 0), 0));
  const total = totals.reduce((a, b) => a + b, 0);
  const max = axisMax(Math.max(...totals));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, days.length);
  const barW = Math.max(2, step * 0.72);
  const y = (v: number): number => (v / max) * plotH;

  const bars = days.map((day, i) => {
    const bottom = PAD.top + plotH;
    const x = PAD.left + i * step + (step - barW) / 2;
    // Each segment spans its share of the running total exactly, so a bar is never taller than its total.
    let below = 0;
    const segments = series.map((s, k) => {
      const v = s.values[i] ?? 0;
      if (v <= 0) return "";
      const top = bottom - y(below + v);
      const h = bottom - y(below) - top;
      below += v;
      return html`<rect class="bar-${k % COLOURS}" x="${x.toFixed(1)}" y="${top.toFixed(1)}" width="${barW.toFixed(1)}" height="${h.toFixed(1)}"><title>${day} · ${s.name}: ${format(v)}</title></rect>`;
    });
    return html`<g data-day="${day}" data-value="${totals[i]}">${segments}</g>`;
  });

  const ticks = days
    .map((day, i) => ({ day, i }))
    .filter(({ i }) => (days.length - 1 - i) % 7 === 0)
    .map(({ day, i }) => {
      const last = i === days.length - 1;
      const x = last ? WIDTH - PAD.right : PAD.left + i * step + step / 2;
      return html`<text x="${x.toFixed(1)}" y="${HEIGHT - 6}" text-anchor="${last ? "end" : "middle"}">${day.slice(5)}</text>`;
    });

  const axis = raw(
    `<line class="axis" x1="${PAD.left}" y1="${PAD.top + plotH}" x2="${WIDTH - PAD.right}" y2="${PAD.top + plotH}"/>` +
      `<line class="axis" x1="${PAD.left}" y1="${PAD.top + plotH / 2}" x2="${WIDTH - PAD.right}" y2="${PAD.top + plotH / 2}" stroke-dasharray="3 3"/>`,
  );
  // The axis has room for about 6 characters: its labels are compact (46K, 2B, 0.046, 400µ); the table has the exact numbers.
  const scale = options.axisScale ?? 1;
  const yLabels = html`<text x="${PAD.left - 6}" y="${PAD.top + 4}" text-anchor="end">${axisLabel(max / scale)}</text>
    <text x="${PAD.left - 6}" y="${PAD.top + plotH / 2 + 4}" text-anchor="end">${axisLabel(max / 2 / scale)}</text>
    <text x="${PAD.left - 6}" y="${PAD.top + plotH + 4}" text-anchor="end">0</text>`;

  const legend = series.length
    ? html`<ul class="legend">${series.map((s, k) => html`<li><i class="bar-${k % COLOURS}"></i>${s.name}</li>`)}</ul>`
    : html`<p class="muted">No requests in this period.</p>`;

  const rows = days
    .map((day, i) => ({ day, i }))
    .filter(({ i }) => totals[i] > 0)
    .map(
      ({ day, i }) =>
        html`<tr><td>${day}</td>${series.map((s) => html`<td class="num">${format(s.values[i] ?? 0)}</td>`)}<td class="num">${format(totals[i])}</td></tr>`,
    );

  return html`<figure class="card chart" id="${options.id}">
  <figcaption><strong>${options.title}</strong> <span class="muted">· ${format(total)} in ${days.length} days</span></figcaption>
  <svg viewBox="0 0 ${WIDTH} ${HEIGHT}" role="img" aria-label="${options.title} per day for the last ${days.length} days, total ${format(total)}" data-total="${total}">
    ${axis}${yLabels}${bars}${ticks}
  </svg>
  ${legend}
  <details><summary>Table</summary><div class="table-wrap"><table>
    <thead><tr><th>Day (UTC)</th>${series.map((s) => html`<th class="num">${s.name}</th>`)}<th class="num">Total</th></tr></thead>
    <tbody>${rows}</tbody>
  </table></div></details>
</figure>`;
}

/**
 * The top of the axis for a tallest bar of `value` (a whole count: requests, tokens, micro-credits):
 * the next of 2, 3, 4, 5, 6, 8, 10 times a power of ten, and even, so that the middle line's label
 * is a whole count too (not 16.5 requests, nor 0.0000005 credits).
 */
function axisMax(value: number): number {
  if (!(value > 2)) return 2;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  // 10 × magnitude always qualifies: it is even and above any value of this magnitude.
  return [1, 2, 3, 4, 5, 6, 8, 10].map((factor) => factor * magnitude).find((top) => top >= value && top % 2 === 0)!;
}

/** A compact axis label; below 0.001 in millionths (400µ), which fit where 0.0004 would not. */
function axisLabel(value: number): string {
  return value > 0 && value < 0.001 ? `${AXIS.format(value * 1_000_000)}µ` : AXIS.format(value);
}

/** The last `count` UTC dates ending today, oldest first. */
export function lastDays(now: number, count: number): string[] {
  const today = Math.floor(now / 86_400_000);
  return Array.from({ length: count }, (_, i) => new Date((today - count + 1 + i) * 86_400_000).toISOString().slice(0, 10));
}
