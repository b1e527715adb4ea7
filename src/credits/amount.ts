/**
 * Credit amounts between people and the database: "12.50" <-> 12_500_000 micro-credits. Parsing
 * is exact decimal arithmetic on the digits (no float ever touches money); at most 6 decimals,
 * at most one billion credits, so every amount is a safe integer.
 */
export const MICRO_PER_CREDIT = 1_000_000;
/**
 * The most a balance may hold, 9 billion credits: below 2^53 micro-credits, so a balance read
 * into JavaScript is still exact. Grants that would pass it are refused (../credits/ledger.ts).
 */
export const MAX_BALANCE_MICRO = 9_000_000_000 * MICRO_PER_CREDIT;
export const PAST_MAX_BALANCE = "the grant would take the balance past 9,000,000,000 credits, the most a balance may hold";
const MAX_CREDITS = 1_000_000_000;
/** What parseCredits takes, for the messages that refuse an amount. */
export const AMOUNT_RULE = "a positive number of credits, at most 1,000,000,000 in one grant, with at most 6 decimals";
const PATTERN = /^(\d{1,10})(?:\.(\d{1,6}))?$/;

/** A positive credit amount (decimal string or number) in micro-credits, or null when invalid. */
export function parseCredits(input: unknown): number | null {
  let text: string;
  if (typeof input === "number") {
    if (!Number.isFinite(input)) return null;
    text = String(input);
  } else if (typeof input === "string") {
    text = input.trim();
  } else {
    return null;
  }
  const match = PATTERN.exec(text);
  if (!match) return null;
  const whole = Number(match[1]);
  const fraction = Number((match[2] ?? "").padEnd(6, "0"));
  const micro = whole * MICRO_PER_CREDIT + fraction;
  return micro > 0 && micro <= MAX_CREDITS * MICRO_PER_CREDIT ? micro : null;
}

/** Micro-credits as a decimal string with six places: 12500000 -> "12.500000". */
export function formatCredits(micro: number): string {
  const sign = micro < 0 ? "-" : "";
  const abs = Math.abs(Math.trunc(micro));
  return `${sign}${Math.floor(abs / MICRO_PER_CREDIT)}.${String(abs % MICRO_PER_CREDIT).padStart(6, "0")}`;
}
