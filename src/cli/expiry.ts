/**
 * The `--expires` value of `key create`: a duration from now (`30d`, `12h`, `90m`, `2w`, at most
 * 100 years) or an ISO 8601 date or date-time (UTC unless it names an offset), read into the
 * absolute expiry in ms. Anything else, zero, or a time already past is a usage error naming the flag.
 */
import { UsageError } from "./args";

const UNIT_MS: Record<string, number> = { m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2})?)?$/;

function isCalendarDay(year: number, month: number, day: number): boolean {
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day); // Date.UTC would take years 0 to 99 for 1900 to 1999
  return date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day;
}

/** The longest duration `--expires` takes; a key meant to outlive it leaves --expires out. */
const MAX_DURATION_MS = 100 * 365 * UNIT_MS.d;

/** `30d`, `12h`, `90m`, `2w`, or an ISO date/time; returns the absolute expiry (ms). */
export function parseExpiry(text: string, now: number): number {
  const relative = /^(\d+)([mhdw])$/.exec(text.trim());
  if (relative) {
    const ms = Number(relative[1]) * UNIT_MS[relative[2]];
    if (ms === 0) throw new UsageError(`--expires: "${text}" would expire the key at once`);
    if (ms > MAX_DURATION_MS) throw new UsageError(`--expires: "${text}" is longer than 100 years; leave --expires out for a key that never expires`);
    return now + ms;
  }
  // ISO 8601 only, with a day that exists: Date.parse alone takes "1" for 2001 and rolls 02-30 over.
  const date = ISO_DATE.exec(text.trim());
  // A time without an offset is UTC, as a day alone is (Date.parse would read it in local time).
  const written = date && text.includes("T") && date[4] === undefined ? `${text.trim()}Z` : text.trim();
  const absolute = date && isCalendarDay(Number(date[1]), Number(date[2]), Number(date[3])) ? Date.parse(written) : NaN;
  if (Number.isNaN(absolute)) throw new UsageError(`--expires: "${text}" is neither a duration like 30d, 12h, 90m, 2w nor a date like 2027-01-01`);
  if (absolute <= now) throw new UsageError(`--expires: ${text} is in the past`);
  return absolute;
}
