/**
 * The one closed set of gateway error codes, their HTTP status and OpenAI's error body
 * `{"error":{"message","type","param","code"}}`. Handlers return or throw GatewayError; the app's
 * single onError renders it. Messages are written for people and never carry secrets.
 */
export const ERROR_STATUS = {
  invalid_request_error: 400,
  invalid_api_key: 401,
  invalid_session: 401,
  invalid_spend_auth: 401,
  nonce_replay: 401,
  spend_auth_disabled: 401,
  authentication_required: 401,
  invalid_credentials: 401,
  insufficient_credits: 402,
  payment_required: 402,
  insufficient_balance: 402,
  budget_exceeded: 402,
  forbidden: 403,
  model_not_allowed: 403,
  ip_not_allowed: 403,
  model_not_found: 404,
  not_found: 404,
  length_required: 411,
  payload_too_large: 413,
  rate_limit_exceeded: 429,
  /** Never sent: the status a request is recorded with when its client left before any answer. */
  client_closed_request: 499,
  internal_error: 500,
  upstream_error: 502,
  chain_unavailable: 502,
  service_unavailable: 503,
  upstream_timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

const ERROR_TYPE: Partial<Record<ErrorCode, string>> = {
  invalid_request_error: "invalid_request_error",
  model_not_found: "invalid_request_error",
  payload_too_large: "invalid_request_error",
  length_required: "invalid_request_error",
  not_found: "invalid_request_error",
  insufficient_credits: "insufficient_quota",
  payment_required: "insufficient_quota",
  insufficient_balance: "insufficient_quota",
  budget_exceeded: "insufficient_quota",
  model_not_allowed: "permission_error",
  ip_not_allowed: "permission_error",
  chain_unavailable: "api_error",
  rate_limit_exceeded: "rate_limit_error",
  forbidden: "permission_error",
  upstream_error: "api_error",
  client_closed_request: "api_error",
  upstream_timeout: "api_error",
  service_unavailable: "api_error",
  internal_error: "api_error",
};

export class GatewayError extends Error {
  override name = "GatewayError";
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      param?: string | null;
      headers?: Record<string, string>;
      extra?: Record<string, unknown>;
      /** Answered only after this pause: a refusal of a body no client sends (HOSTILE_BODY_HOLD_MS in ./body.ts). */
      holdMs?: number;
    } = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

export interface OpenAIErrorBody {
  error: { message: string; type: string; param: string | null; code: string } & Record<string, unknown>;
}

export function errorBody(err: GatewayError): OpenAIErrorBody {
  return {
    error: {
      message: err.message,
      type: ERROR_TYPE[err.code] ?? "authentication_error",
      param: err.options.param ?? null,
      code: err.code,
      ...err.options.extra,
    },
  };
}

export function errorResponse(err: GatewayError, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(errorBody(err)), {
    status: err.status,
    headers: { "content-type": "application/json", ...headers, ...err.options.headers },
  });
}
