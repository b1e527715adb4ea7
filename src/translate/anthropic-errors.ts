/**
 * The gateway's errors (src/errors.ts: a code, its status, a message) in Anthropic's shape,
 * `{"type":"error","error":{"type","message"}}`, for every answer on /v1/messages, translated or
 * not.
 *
 *   anthropicError(status, message) -> { status, body }
 *
 * The status stays the gateway's (the request log, metrics and Retry-After agree with it); the
 * type is the one Anthropic documents for it, which is also how the official SDKs read it (they
 * choose the error class by status; @anthropic-ai/sdk 1.14: 402 PaymentRequiredError, 413
 * ContentTooLargeError, 429 RateLimitError, 503 ServiceUnavailableError, 504
 * GatewayTimeoutError, other 5xx InternalServerError; 429 and 5xx are retried):
 *   400, 411 (and any other 4xx)  invalid_request_error
 *   401 authentication_error      402 billing_error (credit and balance denials)
 *   403 permission_error          404 not_found_error (an unknown model too, as Anthropic does)
 *   413 request_too_large         429 rate_limit_error
 *   503, 529 overloaded_error     504 timeout_error
 *   500, 502 (and any other 5xx)  api_error
 * The gateway's codes all have one status (ERROR_STATUS), so the status alone decides; an
 * upstream's own status maps by the same table.
 */

export type AnthropicErrorType =
  | "invalid_request_error"
  | "authentication_error"
  | "billing_error"
  | "permission_error"
  | "not_found_error"
  | "request_too_large"
  | "rate_limit_error"
  | "timeout_error"
  | "api_error"
  | "overloaded_error";

export interface AnthropicErrorBody {
  type: "error";
  error: { type: AnthropicErrorType; message: string };
}

const BY_STATUS: Record<number, AnthropicErrorType> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  503: "overloaded_error",
  504: "timeout_error",
  529: "overloaded_error",
};

function anthropicErrorType(status: number): AnthropicErrorType {
  return BY_STATUS[status] ?? (status >= 500 ? "api_error" : "invalid_request_error");
}

export function anthropicError(status: number, message: string): { status: number; body: AnthropicErrorBody } {
  return { status, body: { type: "error", error: { type: anthropicErrorType(status), message } } };
}
