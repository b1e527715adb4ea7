/**
 * One wording for schema violations, whichever checker found them (Elysia's route validation or a
 * compiled TypeBox check): `Invalid request body: messages[0].role: must be one of ...`.
 */
import { Value } from "@sinclair/typebox/value";
import type { TSchema } from "@sinclair/typebox";
import { pointerToPath } from "./config/validate";
import { GatewayError } from "./errors";

export interface SchemaViolation {
  path?: string;
  message?: string;
  schema?: unknown;
  value?: unknown;
}

/** The 400 for a body's first schema violation: its wording, and its key path (`messages[0].role`) as `param`. */
export function violationError(first: SchemaViolation | undefined): GatewayError {
  return new GatewayError("invalid_request_error", describeViolation(first), { param: pointerToPath(first?.path ?? "") || null });
}

function describeViolation(first: SchemaViolation | undefined): string {
  if (!first) return "The request body does not match the ChatCompletionRequest schema";
  const path = pointerToPath(first.path ?? "");
  const options = (first.schema as { anyOf?: { const?: unknown; type?: string }[] } | undefined)?.anyOf;
  const bound = options ? nullableBound(options, first.value) : null;
  const reason =
    bound ??
    (options?.every((o) => "const" in o)
      ? `must be one of ${options.map((o) => o.const).join(", ")}`
      : options?.every((o) => typeof o.type === "string")
        ? `expected ${options.map((o) => o.type).join(" or ")}`
        : (first.message ?? "is invalid").replace(/^Expected/, "expected"));
  return `Invalid request body: ${path || "body"}: ${reason}`;
}

/**
 * For a value of a nullable field (`max_tokens`: an integer or null) that has the right type but
 * breaks a bound of it, that bound (`expected integer to be greater or equal to 1`) rather than
 * the bare `expected integer or null`; otherwise null.
 */
function nullableBound(options: { type?: string }[], value: unknown): string | null {
  const typed = options.filter((o) => o.type !== "null");
  if (options.length !== 2 || typed.length !== 1) return null;
  const message = Value.Errors(typed[0] as TSchema, value).First()?.message;
  return message === undefined || message === `Expected ${typed[0].type}` ? null : message.replace(/^Expected/, "expected");
}
