/**
 * Errors on /v1/responses: OpenAI's shape `{"error":{"message","type","param","code"}}`, the same
 * body the rest of /v1 answers with (src/errors.ts), so the openai SDK raises the same classes.
 *
 *   responsesError(status, code, message, param?) -> { status, body }
 *
 * A gateway code (src/errors.ts) keeps its status and type; any other code (an upstream's) is
 * typed by its status: api_error for 5xx, invalid_request_error otherwise. Mid-stream failures
 * are not errors of this kind but a `response.failed` event (./responses-stream.ts).
 */
import { ERROR_STATUS, GatewayError, errorBody, type ErrorCode, type OpenAIErrorBody } from "../errors";

export function responsesError(status: number, code: string, message: string, param: string | null = null): { status: number; body: OpenAIErrorBody } {
  if (Object.hasOwn(ERROR_STATUS, code)) {
    const err = new GatewayError(code as ErrorCode, message, { param });
    return { status: err.status, body: errorBody(err) };
  }
  return { status, body: { error: { message, type: status >= 500 ? "api_error" : "invalid_request_error", param, code } } };
}
