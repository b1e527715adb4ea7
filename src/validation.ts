/**
 * One wording for schema violations, whichever checker found them (Elysia's route validation or a
 * compiled TypeBox check): `Invalid request body: messages[0].role: must be one of ...`.
 */
import { pointerToPath } from "./config/load";

export interface SchemaViolation {
  path?: string;
  message?: string;
  schema?: unknown;
}

/** The violation's key path (`messages[0].role`), for an error's `param`; null for the body as a whole. */
export function violationParam(first: SchemaViolation | undefined): string | null {
  return pointerToPath(first?.path ?? "") || null;
}

export function describeViolation(first: SchemaViolation | undefined): string {
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
