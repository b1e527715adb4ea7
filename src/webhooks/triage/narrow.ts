/** Narrowing a sender's unchecked JSON (and a config's raw document) one value at a time. */
export type Raw = Record<string, unknown>;

export function isObject(value: unknown): value is Raw {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** A non-empty string, or a number as text; null for anything else. */
export function str(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : typeof value === "number" ? String(value) : null;
}
