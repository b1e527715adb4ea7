/**
 * POST /v1/chat/completions as one function from Request to Response: request id, body limit,
 * JSON parse, schema check, handleChat, and error rendering. The server mounts it as a plain Bun
 * route, so no framework work sits on the hot path; the Elysia app mounts the same function for
 * in-process requests and the OpenAPI document. Both paths therefore behave identically.
 */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { AppDeps } from "../deps";
import { errorResponse, GatewayError } from "../errors";
import { declaredLength, parseJsonBody, readBodyText } from "../body";
import { requestMeta, type RequestMeta } from "../request-meta";
import { describeViolation, violationParam } from "../validation";
import { handleChat } from "./chat";
import { ChatCompletionRequest, contentMissing } from "./schema";
import { hundredths, log } from "../log";

type Server = Parameters<RequestMeta["clientIp"]>[0];
export type ChatEndpoint = (request: Request, server: Server) => Promise<Response>;

const checker = TypeCompiler.Compile(ChatCompletionRequest);
/** The body is never read, so the connection closes after the answer (as for a 413). */
function busyReading(): GatewayError {
  return new GatewayError("service_unavailable", "The server is reading too many large request bodies at once (server.max_body_bytes_in_flight); try again shortly", {
    headers: { "retry-after": "1", connection: "close" },
  });
}
/** Refusals made before the gate admits a request (a bad body, an unknown model); not 411 or 413, whose unread body closes the connection. */
const REFUSED_BEFORE_ADMISSION = new Set([400, 404]);

export function createChatEndpoint(deps: AppDeps): ChatEndpoint {
  const trusted = new Set(deps.config.server.trusted_proxies);
  const maxBody = deps.config.server.max_body_bytes;
  const bodyBudget = deps.config.server.max_body_bytes_in_flight;
  /** Bytes the bodies being read declared (max_body_bytes for a chunked one): many slow uploads cannot fill memory. */
  let bodiesInFlight = 0;
  return async function serveChat(request, server) {
    const meta = requestMeta(request, trusted);
    try {
      const declared = declaredLength(request);
      const reserved = Number.isFinite(declared) ? Math.min(declared, maxBody) : maxBody;
      if (bodiesInFlight + reserved > bodyBudget) throw busyReading();
      bodiesInFlight += reserved;
      let text: string;
      try {
        text = await readBodyText(request, maxBody, declared);
      } finally {
        bodiesInFlight -= reserved;
      }
      const body = parseJsonBody(text, maxBody);
      const bodyBytes = Number.isFinite(declared) ? declared : Buffer.byteLength(text);
      if (!checker.Check(body)) {
        const first = checker.Errors(body).First();
        throw new GatewayError("invalid_request_error", describeViolation(first), { param: violationParam(first) });
      }
      const missing = contentMissing(body.messages);
      if (missing !== -1) {
        const param = `messages[${missing}].content`;
        throw new GatewayError("invalid_request_error", `Invalid request body: ${param}: required (a string or an array; null only on an assistant message with tool_calls)`, { param });
      }
      return await handleChat(deps, { request, body, bodyBytes, requestId: meta.id, startedAt: meta.startedAt, clientIp: () => meta.clientIp(server) });
    } catch (err) {
      // Refused before admission (a bad body, an unknown model): an invalid credential is answered
      // first; the gateway's own time is all of it.
      if (err instanceof GatewayError) {
        const refusal = REFUSED_BEFORE_ADMISSION.has(err.status) ? (deps.gate.credentialRefusal?.(request) ?? err) : err;
        return errorResponse(refusal, { "x-request-id": meta.id, "x-gateway-overhead-ms": hundredths(performance.now() - meta.startedAt) });
      }
      // A client that left while sending its body: nobody to answer, and nothing went wrong here.
      if (request.signal.aborted) return errorResponse(new GatewayError("client_closed_request", "the client closed the connection before its body arrived"), { "x-request-id": meta.id });
      log("error", "unhandled error in chat completions", { request_id: meta.id, error: String((err as Error)?.message ?? err) });
      return errorResponse(new GatewayError("internal_error", `Internal error; quote request id ${meta.id} when reporting it`), { "x-request-id": meta.id });
    }
  };
}
