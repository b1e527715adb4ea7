/**
 * POST /v1/chat/completions as one function from Request to Response: request id, body limits
 * (per request and in flight together), JSON parse, schema check, the route, handleChat, and error
 * rendering. A request refused before handleChat is recorded here (log line, request-log row,
 * metrics), everything after it there. The server mounts it as a plain Bun
 * route, so no framework work sits on the hot path; the Elysia app mounts the same function for
 * in-process requests and the OpenAPI document. Both paths therefore behave identically.
 */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import type { AppDeps } from "../deps";
import { errorResponse, GatewayError } from "../errors";
import { BodyBudget, declaredLength, parseJsonBody, readBodyText } from "../body";
import { requestMeta, type RequestMeta } from "../request-meta";
import { trustedProxies } from "../client-address";
import { violationError } from "../validation";
import { completionsPriced, handleChat, refusalRecord } from "./chat";
import { ChatCompletionRequest, contentMissing } from "./schema";
import { hundredths, log } from "../log";
import { createCors, fromForeignPage } from "../cors";

type Server = Parameters<RequestMeta["clientIp"]>[0];
export type ChatEndpoint = (request: Request, server: Server) => Promise<Response>;

const checker = TypeCompiler.Compile(ChatCompletionRequest);
/** Refusals made before the gate admits a request (a bad body, an unknown model); not 411 or 413, whose unread body closes the connection. */
const REFUSED_BEFORE_ADMISSION = new Set([400, 404]);

export function createChatEndpoint(deps: AppDeps): ChatEndpoint {
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  const maxBody = deps.config.server.max_body_bytes;
  const budget = new BodyBudget(deps.config.server.max_body_bytes_in_flight);
  const cors = createCors(deps.config.server.cors_origins);
  return async function serveChat(request, server) {
    const meta = requestMeta(request, trusted);
    /** From the call of handleChat on, every outcome is recorded there; refusals before it, here. */
    let handled = false;
    try {
      if (fromForeignPage(request, cors, deps.config.server.public_url)) {
        throw new GatewayError("forbidden", "This API does not take requests from pages of other origins; list the page's origin in server.cors_origins to allow it");
      }
      const declared = declaredLength(request);
      const text = await readBodyText(request, maxBody, declared, budget);
      const body = parseJsonBody(text, maxBody);
      const bodyBytes = Number.isFinite(declared) ? declared : Buffer.byteLength(text);
      if (!checker.Check(body)) {
        throw violationError(checker.Errors(body).First());
      }
      const missing = contentMissing(body.messages);
      if (missing !== -1) {
        const param = `messages[${missing}].content`;
        throw new GatewayError("invalid_request_error", `Invalid request body: ${param}: required (a string or an array; null only on an assistant message with tool_calls)`, { param });
      }
      const route = deps.registry.resolve(body.model);
      if (!route) {
        throw new GatewayError("model_not_found", `The model "${body.model}" does not exist; GET /v1/models lists the available models`, { param: "model" });
      }
      if (body.n_predict === -1 && completionsPriced(route)) {
        throw new GatewayError("invalid_request_error", `n_predict -1 sets no limit, and "${route.id}" charges for completions: send a limit of at least 0`, { param: "n_predict" });
      }
      handled = true;
      return await handleChat(deps, { request, route, body, bodyBytes, requestId: meta.id, startedAt: meta.startedAt, clientIp: () => meta.clientIp(server) });
    } catch (err) {
      if (err instanceof GatewayError) {
        // Refused before admission (a bad body, an unknown model): an invalid credential is answered
        // first, and it is recorded here like any other request (handleChat recorded the rest).
        let refusal = err;
        if (!handled) {
          if (REFUSED_BEFORE_ADMISSION.has(err.status)) refusal = deps.gate.credentialRefusal?.(request) ?? err;
          deps.onRequestDone(refusalRecord(request, meta.id, meta.startedAt, refusal));
        }
        return errorResponse(refusal, { "x-request-id": meta.id, "x-gateway-overhead-ms": hundredths(performance.now() - meta.startedAt) });
      }
      // A client that left while sending its body: nobody to answer, and nothing went wrong here.
      if (request.signal.aborted && !handled) {
        const gone = new GatewayError("client_closed_request", "the client closed the connection before its body arrived");
        deps.onRequestDone(refusalRecord(request, meta.id, meta.startedAt, gone));
        return errorResponse(gone, { "x-request-id": meta.id });
      }
      log("error", "unhandled error in chat completions", { request_id: meta.id, error: String((err as Error)?.message ?? err) });
      return errorResponse(new GatewayError("internal_error", `Internal error; quote request id ${meta.id} when reporting it`), { "x-request-id": meta.id });
    }
  };
}
