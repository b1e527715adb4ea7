/**
 * One wording for schema violations, whichever checker found them (Elysia's route validation or a
 * compiled TypeBox check): `Invalid request body: messages[0].role: must be one of ...`.
 */
import { pointerToPath } from "./config/load";
import { GatewayError } from "./errors";

export interface SchemaViolation {
  path?: string;
  message?: string;
  schema?: unknown;
}

/** The 400 for a body's first schema violation: its wording, and its key path (`messages[0].role`) as `param`. */
export function violationError(first: SchemaViolation | undefined): GatewayError {
  return new GatewayError("invalid_request_error", describeViolation(first), { param: pointerToPath(first?.path ?? "") || null });
}

function describeViolation(first: SchemaViolation | undefined): string {
  if (!first) return "The request body does not match the ChatCompletionRequest schema";
  const path = pointerToPath(first.path ?? "");
  const options = (first.schema as { anyOf?: { const?: unknown; type?: string }[] } | undefined)?.anyOf;
  const reason = options?.every((o) => "const" in o)
    ? `must be one of ${options.map((o) => o.const).join(", ")}`
    : options?.every((o) => typeof o.type === "string")
      ? `expected ${options.map((o) => o.type).join(" or ")}`
      : (first.message ?? "is invalid").replace(/^Expected/, "expected");
  return `Invalid request body: ${path || "body"}: ${reason}`;
}
