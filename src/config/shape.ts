/**
 * Two checks of the config as written that TypeBox's own leaves out: a table given as a list or a
 * date (`server = []`, which its defaults turned into an all-default table without a word), and a
 * whole number too large to be exact (`retry_after_s = 1e300`, a float TOML that passes as an
 * integer and went out as `retry-after: 1e+300`). Run before defaults are filled in.
 */
import type { TSchema } from "@sinclair/typebox";

/** The first such mistake in `value` against `schema`, as "path: reason", or null. */
export function shapeMistake(schema: TSchema, value: unknown, path = ""): string | null {
  if (schema.type === "object" && value !== undefined) {
    // A TOML date or time is an object too (`price = 1979-05-27` was a price of nothing).
    if (value === null || typeof value !== "object" || Array.isArray(value) || value instanceof Date) {
      const given = Array.isArray(value) ? "a list" : value instanceof Date ? "a date or time" : value === null ? "null" : `a ${typeof value}`;
      return `${path || "(root)"}: expected a table, not ${given}`;
    }
    const properties = (schema.properties ?? {}) as Record<string, TSchema>;
    for (const [key, child] of Object.entries(properties)) {
      const found = shapeMistake(child, (value as Record<string, unknown>)[key], path ? `${path}.${key}` : key);
      if (found !== null) return found;
    }
  } else if (schema.type === "array" && Array.isArray(value) && schema.items) {
    for (const [i, item] of value.entries()) {
      const found = shapeMistake(schema.items as TSchema, item, `${path}[${i}]`);
      if (found !== null) return found;
    }
  } else if (schema.type === "integer" && typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return `${path}: ${value} is too far from 0 to be a whole number exactly (at most 9007199254740991 either way)`;
  }
  return null;
}
