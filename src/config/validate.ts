/**
 * The config checked against its schema, and the one place where what TypeBox finds becomes a
 * message (`server.max_body_bytes: expected integer, not a string`). Two passes: the document as
 * written, before defaults are filled in (a table or list written as something else, which the
 * defaults would silently replace; a whole number too large to be exact), then the document with
 * its defaults (types, ranges, unknown keys, allowed values). What the schema cannot say (one key
 * against another) is checked afterwards, in checks.ts.
 */
import type { TSchema } from "@sinclair/typebox";
import { Value } from "@sinclair/typebox/value";
import { ValueErrorType, type ValueError } from "@sinclair/typebox/errors";
import { ConfigError, type KeyNames } from "./errors";

/** Annotations the config schema may carry for its messages (TypeBox keeps unknown schema options). */
interface Annotated {
  /** What a string with a `pattern` should be, said in words: "an http:// or https:// URL". */
  expected?: string;
  /** On a table: keys it does not take, each with what to do instead. */
  misplaced?: Record<string, string>;
}

/** `/models/2/targets/0/upstream` -> `models[2].targets[0].upstream` */
export function pointerToPath(pointer: string): string {
  return pointer
    .split("/")
    .filter(Boolean)
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

/** The document as written (env: resolved, no defaults yet), refused at its first mistake of shape. */
export function checkWritten(schema: TSchema, value: unknown, names: KeyNames): void {
  const found = writtenMistake(schema, value, "", names);
  if (found !== null) throw new ConfigError(`${names.say(found.path)}: ${found.reason}`);
}

/** The document with its defaults, refused at its first violation of the schema. */
export function checkSchema(schema: TSchema, value: unknown, names: KeyNames): void {
  const first = Value.Errors(schema, value).First();
  if (first !== undefined) throw new ConfigError(`${names.say(pointerToPath(first.path)) || "(root)"}: ${reason(first)}`);
}

interface Mistake {
  path: string;
  reason: string;
}

/**
 * TypeBox's defaults would turn `server = []` into an all-default table and `[upstreams]` (for
 * `[[upstreams]]`) into an empty list without a word; its integer check passes a float as large
 * as `1e300`, which is no exact whole number. A TOML date or time is an object, never a table.
 */
function writtenMistake(schema: TSchema, value: unknown, path: string, names: KeyNames): Mistake | null {
  if (value === undefined) return null;
  if (schema.type === "object") {
    if (value === null || typeof value !== "object" || Array.isArray(value) || value instanceof Date) {
      return { path: path || "(root)", reason: `expected a table, not ${given(value)}` };
    }
    const properties = (schema.properties ?? {}) as Record<string, TSchema>;
    for (const [key, child] of Object.entries(properties)) {
      const found = writtenMistake(child, (value as Record<string, unknown>)[key], path ? `${path}.${key}` : key, names);
      if (found !== null) return found;
    }
  } else if (schema.type === "array") {
    if (!Array.isArray(value)) {
      const ofTables = (schema.items as TSchema | undefined)?.type === "object" && typeof value === "object";
      return { path, reason: `expected a list${ofTables ? ` (a list of tables is written [[${names.local(path)}]])` : ""}` };
    }
    for (const [i, item] of value.entries()) {
      const found = writtenMistake(schema.items as TSchema, item, `${path}[${i}]`, names);
      if (found !== null) return found;
    }
  } else if (schema.type === "integer" && typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value)) {
    return { path, reason: `${value} is too far from 0 to be a whole number exactly (at most 9007199254740991 either way)` };
  }
  return null;
}

/** A violation in words. Values are described, not echoed (a secret may be the one mistyped); an enum's short string is. */
function reason(error: ValueError): string {
  const schema = error.schema as TSchema & Annotated;
  switch (error.type) {
    case ValueErrorType.ObjectAdditionalProperties: {
      const key = error.path.slice(error.path.lastIndexOf("/") + 1);
      return schema.misplaced?.[key] ?? "unknown key";
    }
    case ValueErrorType.ObjectRequiredProperty:
      return "required";
    case ValueErrorType.Union:
      return oneOf(schema, error.value);
    case ValueErrorType.Integer:
    case ValueErrorType.Number:
    case ValueErrorType.Boolean:
      return `expected ${schema.type}, not ${given(error.value)}`;
    case ValueErrorType.String: {
      const unquoted = typeof error.value === "number" || typeof error.value === "boolean";
      return `expected string, not ${given(error.value)}${unquoted ? " (write it in quotes)" : ""}`;
    }
    case ValueErrorType.Object:
      return `expected a table, not ${given(error.value)}`;
    case ValueErrorType.Array:
      return `expected a list, not ${given(error.value)}`;
    case ValueErrorType.IntegerMinimum:
    case ValueErrorType.NumberMinimum:
      return `must be at least ${schema.minimum}`;
    case ValueErrorType.IntegerMaximum:
    case ValueErrorType.NumberMaximum:
      return `must be at most ${schema.maximum}`;
    case ValueErrorType.StringMinLength:
      return schema.minLength === 1 ? "must not be empty" : `must be at least ${schema.minLength} characters`;
    case ValueErrorType.StringPattern:
      return schema.expected ? `expected ${schema.expected}` : `must match ${schema.pattern}`;
    case ValueErrorType.ArrayMinItems:
      return `must list at least ${schema.minItems === 1 ? "one" : schema.minItems}`;
    case ValueErrorType.ArrayUniqueItems:
      return "lists a value more than once";
    default:
      return error.message;
  }
}

/** An enum's allowed values, and the one given when it is a short string. */
function oneOf(schema: TSchema, value: unknown): string {
  const options = (schema.anyOf ?? []) as Array<{ const?: unknown }>;
  if (!options.every((option) => "const" in option)) return `not ${given(value)}, which is none of the allowed kinds of value`;
  const got = typeof value === "string" && value.length <= 40 ? ` (got ${JSON.stringify(value)})` : "";
  return `must be one of ${options.map((option) => JSON.stringify(option.const)).join(", ")}${got}`;
}

/** What kind of value was written, as TOML names it. */
function given(value: unknown): string {
  if (typeof value === "number") return Number.isNaN(value) ? "nan" : !Number.isFinite(value) ? "inf" : Number.isInteger(value) ? "a number" : "a fraction";
  if (Array.isArray(value)) return "a list";
  if (value instanceof Date) return "a date or time";
  if (value === null) return "null";
  if (typeof value === "object") return "a table";
  return `a ${typeof value}`;
}
