/**
 * A key's policy in the dashboard: the fields of the create form and of each key's edit form (the
 * same text the CLI's key policy flags take, parsed by src/auth/key-policy.ts), and the cell of the
 * keys table that shows the policy with the key's spend and what is left of its budget.
 */
import { html, type Html } from "../html";
import { describePolicy, type PolicyColumns, type PolicyFlags } from "../../auth/key-policy";
import { formatCredits } from "../../credits/amount";

/** The form's field names, as the CLI's flags spell them (underscores for dashes). */
const POLICY_FIELDS = [
  { name: "models", flag: "models", label: "Models", hint: "globs, comma-separated: llama*,qwen3:*", placeholder: "any model" },
  { name: "budget", flag: "budget", label: "Budget", hint: "credits per day, week, month or total: 5/day", placeholder: "no budget" },
  { name: "per_minute", flag: "perMinute", label: "Requests per minute", hint: "", placeholder: "the default" },
  { name: "tokens_per_minute", flag: "tokensPerMinute", label: "Tokens per minute", hint: "", placeholder: "the default" },
  { name: "allow_ip", flag: "allowIp", label: "Client addresses", hint: "addresses or CIDR blocks: 10.0.0.0/8,192.168.1.7", placeholder: "any address" },
] as const;

/** Policy flags from a posted form; a field left empty clears that part (absent fields change nothing). */
export function policyFlagsOf(form: Record<string, string | undefined>): PolicyFlags {
  const flags: PolicyFlags = {};
  for (const field of POLICY_FIELDS) {
    const value = form[field.name];
    if (value !== undefined) flags[field.flag] = value.trim();
  }
  return flags;
}

/** The parser's message names the CLI's flag (`--budget: ...`): in the form, the field's label. */
export function policyMessage(error: string): string {
  const flag = /^--([a-z-]+)/.exec(error)?.[1];
  const field = POLICY_FIELDS.find((f) => f.name === flag?.replaceAll("-", "_"));
  return field === undefined || flag === undefined ? error : `${field.label}${error.slice(2 + flag.length)}`;
}

/** A refused form's policy fields as sent, to show them again. */
export function policyFormFields(form: Record<string, string | undefined>): Record<string, string> {
  return Object.fromEntries(POLICY_FIELDS.map((f) => [f.name, form[f.name] ?? ""]));
}

/** The form's text for a stored policy (what the edit form is filled with). */
function policyFormValues(row: PolicyColumns): Record<string, string> {
  return {
    models: row.models ?? "",
    budget: row.budgetMicro !== null && row.budgetPeriod !== null ? `${trimCredits(row.budgetMicro)}/${row.budgetPeriod}` : "",
    per_minute: row.perMinute === null ? "" : String(row.perMinute),
    tokens_per_minute: row.tokensPerMinute === null ? "" : String(row.tokensPerMinute),
    allow_ip: row.allowIps ?? "",
  };
}

function trimCredits(micro: number): string {
  return formatCredits(micro).replace(/\.?0+$/, "");
}

export function policyInputs(idPrefix: string, values: Record<string, string> = {}): Html {
  return html`${POLICY_FIELDS.map((f) => html`<div><label for="${idPrefix}-${f.name}">${f.label}${f.hint ? html` <span class="hint">${f.hint}</span>` : ""}</label><input id="${idPrefix}-${f.name}" name="${f.name}" type="text" maxlength="2000" autocomplete="off" placeholder="${f.placeholder}" value="${values[f.name] ?? ""}"></div>`)}`;
}

/** What the keys table shows of a key's policy and spend. */
export interface KeySpendView extends PolicyColumns {
  /** Spent in the budget period (or this UTC month without a budget), micro-credits. */
  spentMicro: number;
}

export function policyCell(key: KeySpendView): Html {
  const policy = describePolicy(key);
  const spent = formatCredits(key.spentMicro);
  const budget =
    key.budgetMicro !== null && key.budgetPeriod !== null
      ? html`<br><span class="hint" data-spent="${spent}">spent ${spent}, ${formatCredits(Math.max(0, key.budgetMicro - key.spentMicro))} left this ${key.budgetPeriod === "total" ? "budget" : key.budgetPeriod}</span>`
      : html`<br><span class="hint" data-spent="${spent}">spent ${spent} this month</span>`;
  return html`<span class="policy">${policy === "-" ? "none" : policy}</span>${budget}`;
}

/** A key's edit form, folded away under its row's policy cell. */
export function policyEditForm(key: KeySpendView & { id: string; name: string }, options: { csrf: string; action: string }): Html {
  return html`<details class="policy-edit"><summary>Edit policy</summary>
  <form method="post" action="${options.action}" aria-label="Policy of key ${key.name}">
    <input type="hidden" name="csrf" value="${options.csrf}">
    ${policyInputs(`policy-${key.id}`, policyFormValues(key))}
    <button type="submit">Save policy</button>
    <p class="hint">An empty field removes that limit. Changes apply from the key's next request.</p>
  </form></details>`;
}
