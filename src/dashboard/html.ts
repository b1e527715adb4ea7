/**
 * HTML templating for the dashboard: a tagged template that escapes every interpolated value
 * unless it is already Html (a fragment built by this same tag, or `raw()` for trusted markup
 * such as the server-rendered SVG chart). Nothing user-controlled reaches a page unescaped.
 */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type Interpolation = Html | string | number | bigint | null | undefined | false | Interpolation[];

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** Trusted markup, inserted verbatim. Only for strings this module tree generated itself. */
export function raw(markup: string): Html {
  return new Html(markup);
}

export function html(strings: TemplateStringsArray, ...values: Interpolation[]): Html {
  let out = strings[0];
  for (let i = 0; i < values.length; i++) out += render(values[i]) + strings[i + 1];
  return new Html(out);
}

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return "";
  if (value instanceof Html) return value.value;
  if (Array.isArray(value)) return value.map(render).join("");
  return escapeHtml(String(value));
}

/** Micro-credits as a credit amount with up to 6 decimals, trailing zeros trimmed (12.5, 0.000042). */
export function displayCredits(micro: number): string {
  const sign = micro < 0 ? "-" : "";
  const abs = Math.abs(Math.trunc(micro));
  const whole = Math.floor(abs / 1_000_000);
  const frac = String(abs % 1_000_000)
    .padStart(6, "0")
    .replace(/0+$/, "");
  return `${sign}${whole.toLocaleString("en-US")}${frac ? `.${frac}` : ""}`;
}

/** A timestamp as `<time>` in UTC; the client script rewrites it to the reader's local time. */
export function time(ms: number | null | undefined, options: { empty?: string } = {}): Html {
  if (ms === null || ms === undefined) return html`<span class="muted">${options.empty ?? "never"}</span>`;
  const iso = new Date(ms).toISOString();
  return html`<time datetime="${iso}" data-local>${iso.slice(0, 16).replace("T", " ")} UTC</time>`;
}

export function formatNumber(n: number): string {
  return n.toLocaleString("en-US");
}

/**
 * An email field: text with an email keyboard, not `type="email"`, which refuses a local part that
 * is not ASCII (`josé@example.com`) the server takes. The server checks the address.
 */
export function emailInput(id: string, options: { autocomplete: "username" | "off"; autofocus?: boolean; value?: string }): Html {
  return html`<input id="${id}" name="email" type="text" inputmode="email" spellcheck="false" autocapitalize="none" required autocomplete="${options.autocomplete}"${options.autofocus ? raw(" autofocus") : ""} value="${options.value ?? ""}">`;
}
