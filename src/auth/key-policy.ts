/**
 * A key's policy: what it may call, spend and from where, every part optional (DESIGN.md "Key
 * policy"). Here: reading it from the key policy flags (the CLI and the dashboard's form take the
 * same text), showing it, and compiling it once per cached key for the request path, where each
 * check is a map lookup or a BlockList test, never a database read.
 *
 *   parsePolicyFlags({ models?, budget?, perMinute?, tokensPerMinute?, allowIp? }) -> PolicyChange | { error }
 *   compilePolicy(row)   -> CompiledPolicy | null (null: nothing set, nothing to check)
 *   describePolicy(row)  -> "models llama*,qwen3:*; budget 5/day; ..." or "-"
 *   budgetPeriod(period, now) -> { start, resetsAt } (UTC calendar periods; `total` never resets)
 */
import { BlockList, isIP } from "node:net";
import { parseProxyEntry } from "../client-address";
import { formatCredits, parseCredits } from "../credits/amount";

const BUDGET_PERIODS = ["day", "week", "month", "total"] as const;
export type BudgetPeriod = (typeof BUDGET_PERIODS)[number];

/** The policy columns of an api_keys row (null: not set). */
export interface PolicyColumns {
  perMinute: number | null;
  models: string | null;
  budgetMicro: number | null;
  budgetPeriod: BudgetPeriod | null;
  tokensPerMinute: number | null;
  allowIps: string | null;
}

/** The columns a set of flags changes; a column absent is left as it is. */
export type PolicyChange = Partial<PolicyColumns>;

/** The text of each policy flag, as typed (undefined: not given). */
export interface PolicyFlags {
  models?: string;
  budget?: string;
  perMinute?: string;
  tokensPerMinute?: string;
  allowIp?: string;
}

/** The most a per-minute limit may name: the x-ratelimit headers stay plain integers. */
const MAX_LIMIT = 1_000_000_000;
const MAX_GLOBS = 100;
const MAX_ADDRESSES = 100;
/** Client addresses whose allowlist answer one key keeps. */
const MAX_DECIDED_ADDRESSES = 1_000;

export function parsePolicyFlags(flags: PolicyFlags): PolicyChange | { error: string } {
  const change: PolicyChange = {};
  if (flags.models !== undefined) {
    const globs = listOf(flags.models);
    if (globs.length > MAX_GLOBS) return { error: `--models: at most ${MAX_GLOBS} patterns` };
    const bad = globs.find((g) => g.length > 200 || /[\s\p{Cc}]/u.test(g));
    if (bad !== undefined) return { error: "--models: a pattern is a model id or alias with * for any run of characters (no spaces)" };
    change.models = globs.length === 0 ? null : globs.join(",");
  }
  if (flags.budget !== undefined) {
    const budget = parseBudget(flags.budget);
    if ("error" in budget) return budget;
    change.budgetMicro = budget.micro;
    change.budgetPeriod = budget.period;
  }
  for (const [flag, text, column] of [
    ["per-minute", flags.perMinute, "perMinute"],
    ["tokens-per-minute", flags.tokensPerMinute, "tokensPerMinute"],
  ] as const) {
    if (text === undefined) continue;
    if (text.trim() === "") {
      change[column] = null;
      continue;
    }
    // Digits only (Number() also takes 1e30, 0x10 and " 7").
    const n = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
    if (!(n >= 1 && n <= MAX_LIMIT)) return { error: `--${flag} must be a whole number from 1 to ${MAX_LIMIT} (empty clears it)` };
    change[column] = n;
  }
  if (flags.allowIp !== undefined) {
    const entries = listOf(flags.allowIp);
    if (entries.length > MAX_ADDRESSES) return { error: `--allow-ip: at most ${MAX_ADDRESSES} addresses or blocks` };
    const canonical: string[] = [];
    for (const entry of entries) {
      const parsed = parseProxyEntry(entry);
      if (parsed === null) return { error: `--allow-ip: "${entry.slice(0, 60)}" is not an IP address or a CIDR block like 10.0.0.0/8 or fd00::/8` };
      canonical.push(parsed.prefix === null ? parsed.address : `${parsed.address}/${parsed.prefix}`);
    }
    change.allowIps = canonical.length === 0 ? null : canonical.join(",");
  }
  return change;
}

/** `5/day`, `0.50/week`, `20/month`, `100/total`; empty clears the budget. */
function parseBudget(text: string): { micro: number | null; period: BudgetPeriod | null } | { error: string } {
  if (text.trim() === "") return { micro: null, period: null };
  const [amount, period, extra] = text.trim().split("/");
  const micro = parseCredits(amount ?? "");
  if (micro === null || extra !== undefined || !BUDGET_PERIODS.includes(period as BudgetPeriod)) {
    return {
      error: `--budget: "${text.slice(0, 40)}" is not an amount of credits per period, like 5/day (periods: ${BUDGET_PERIODS.join(", ")}; empty clears it)`,
    };
  }
  return { micro, period: period as BudgetPeriod };
}

function listOf(text: string): string[] {
  return text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** The UTC calendar period `now` falls in; a week starts on Monday. `total` starts at 0 and never resets. */
export function budgetPeriod(period: BudgetPeriod, now: number): { start: number; resetsAt: number | null } {
  if (period === "total") return { start: 0, resetsAt: null };
  const d = new Date(now);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth();
  const day = d.getUTCDate();
  if (period === "month") return { start: Date.UTC(y, m, 1), resetsAt: Date.UTC(y, m + 1, 1) };
  if (period === "day") return { start: Date.UTC(y, m, day), resetsAt: Date.UTC(y, m, day + 1) };
  const monday = day - ((d.getUTCDay() + 6) % 7);
  return { start: Date.UTC(y, m, monday), resetsAt: Date.UTC(y, m, monday + 7) };
}

/** What the request path checks of a key, built once when the key is cached. */
export interface CompiledPolicy {
  /** Whether a route (by its id or any alias) is on the key's allowlist; absent: every model. */
  allowsModel?(route: { id: string; aliases: readonly string[] }): boolean;
  /** Whether a canonical client address is allowed; absent: any. */
  allowsAddress?(address: string): boolean;
  budget?: { micro: number; period: BudgetPeriod };
  tokensPerMinute?: number;
}

export function compilePolicy(row: PolicyColumns): CompiledPolicy | null {
  const policy: CompiledPolicy = {};
  if (row.models !== null) {
    const patterns = listOf(row.models).map(globPattern);
    const matches = (name: string): boolean => patterns.some((p) => p.test(name));
    // Per route object: a key calls few models, and the answer never changes while it is cached.
    const decided = new WeakMap<object, boolean>();
    policy.allowsModel = (route) => {
      let ok = decided.get(route);
      if (ok === undefined) decided.set(route, (ok = matches(route.id) || route.aliases.some(matches)));
      return ok;
    };
  }
  if (row.allowIps !== null) {
    const list = new BlockList();
    for (const entry of listOf(row.allowIps)) {
      const parsed = parseProxyEntry(entry);
      if (parsed === null) continue;
      const family = isIP(parsed.address) === 4 ? "ipv4" : "ipv6";
      if (parsed.prefix === null) list.addAddress(parsed.address, family);
      else list.addSubnet(parsed.address, parsed.prefix, family);
    }
    // A key is used from few addresses: each one's answer is kept (a BlockList test is ~0.5 µs).
    const decided = new Map<string, boolean>();
    policy.allowsAddress = (address) => {
      let ok = decided.get(address);
      if (ok === undefined) {
        if (decided.size >= MAX_DECIDED_ADDRESSES) decided.clear();
        const family = isIP(address);
        decided.set(address, (ok = family !== 0 && list.check(address, family === 4 ? "ipv4" : "ipv6")));
      }
      return ok;
    };
  }
  if (row.budgetMicro !== null && row.budgetPeriod !== null) policy.budget = { micro: row.budgetMicro, period: row.budgetPeriod };
  if (row.tokensPerMinute !== null) policy.tokensPerMinute = row.tokensPerMinute;
  return Object.keys(policy).length === 0 ? null : policy;
}

/** `*` is any run of characters (`/` and `:` included); everything else is literal. */
function globPattern(glob: string): RegExp {
  const body = glob
    .split("*")
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
    .join(".*");
  return new RegExp(`^${body}$`, "s");
}

/** The policy in one line, as `key list` and the dashboard show it; "-" when nothing is set. */
export function describePolicy(row: PolicyColumns): string {
  const parts: string[] = [];
  if (row.models !== null) parts.push(`models ${row.models}`);
  if (row.budgetMicro !== null && row.budgetPeriod !== null) parts.push(`budget ${formatCredits(row.budgetMicro)}/${row.budgetPeriod}`);
  if (row.perMinute !== null) parts.push(`${row.perMinute} req/min`);
  if (row.tokensPerMinute !== null) parts.push(`${row.tokensPerMinute} tokens/min`);
  if (row.allowIps !== null) parts.push(`from ${row.allowIps}`);
  return parts.length === 0 ? "-" : parts.join("; ");
}
