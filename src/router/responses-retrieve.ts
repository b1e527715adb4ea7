/**
 * GET /v1/responses/{id}: a response /v1/responses stored (./response-store.ts), to the identity
 * that made it. Admitted as the /v1 calls are, but as a read (the Gate's admitRead): an API key or
 * a session, the key's address allowlist, one request of the caller's rate limits, no credits;
 * refused from a foreign page's session as the model endpoints refuse it; CORS headers as
 * server.cors_origins says; one request-log row (endpoint "responses", no model, no tokens),
 * refused or not. Another identity's id reads exactly as an unknown one: a 404.
 */
import type { AppDeps } from "../deps";
import { errorBody, GatewayError } from "../errors";
import { createCors, fromForeignPage } from "../cors";
import { trustedProxies } from "../client-address";
import { requestMeta, type RequestMeta } from "../requests/meta";
import { hundredths } from "../log";
import type { Identity } from "../auth/types";
import { createResponseStore, responseOwner, type ResponseStore } from "./response-store";
import { record, refusedIdentity, type Outcome } from "./served";

type Server = Parameters<RequestMeta["clientIp"]>[0];
export type ResponseReader = (request: Request, server: Server, id: string) => Promise<Response>;

const READ: Omit<Outcome, "status"> = {
  upstream: null,
  usage: null,
  price: { prompt: 0, completion: 0, request: 0 },
  model: "",
  endpoint: "responses",
  upstreamMs: 0,
};

export function createResponseReader(deps: AppDeps): ResponseReader {
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  const cors = createCors(deps.config.server.cors_origins);
  let store: ResponseStore | null = null;
  return async (request, server, id) => {
    const startedAt = performance.now();
    const meta = requestMeta(request, trusted);
    const answer = (status: number, identity: Identity, body: string, headers: Record<string, string>): Response => {
      const latencyMs = performance.now() - startedAt;
      deps.onRequestDone(record(meta.id, identity, { ...READ, status }, latencyMs));
      headers["x-request-id"] = meta.id;
      headers["x-gateway-overhead-ms"] = hundredths(latencyMs);
      headers["content-type"] = "application/json";
      cors?.decorate(request, headers);
      return new Response(body, { status, headers });
    };
    /** An error in OpenAI's shape, with its own headers (a 429's retry-after) over `headers`. */
    const refused = (error: GatewayError, identity: Identity, headers: Record<string, string> = {}): Response =>
      answer(error.status, identity, JSON.stringify(errorBody(error)), { ...headers, ...error.options.headers });
    if (fromForeignPage(request, cors, deps.config.server.public_url)) {
      const error = new GatewayError(
        "forbidden",
        "This API does not take requests from pages of other origins; list the page's origin in server.cors_origins to allow it",
      );
      return refused(error, refusedIdentity(error, request));
    }
    const admitted =
      deps.gate.admitRead?.({ request, clientIp: () => meta.clientIp(server) }) ??
      new GatewayError("authentication_required", "Stored responses belong to the API key's or session's user that made them: authenticate to read one");
    const admission = admitted instanceof Promise ? await admitted : admitted;
    if (admission instanceof GatewayError) return refused(admission, refusedIdentity(admission, request));
    const owner = responseOwner(admission.identity);
    store ??= createResponseStore(deps.db, { maxBytes: deps.config.server.response_store_max_bytes, now: deps.now });
    let stored: Awaited<ReturnType<ResponseStore["get"]>>;
    try {
      stored = owner === null ? null : await store.get(id, owner);
    } catch (err) {
      // The database refused the read: settled and recorded as the 500 the app renders.
      admission.settle({ usage: null, status: 500, upstream: null, latencyMs: performance.now() - startedAt });
      deps.onRequestDone(record(meta.id, admission.identity, { ...READ, status: 500 }, performance.now() - startedAt));
      throw err;
    }
    const status = stored === null ? 404 : 200;
    const settled = admission.settle({ usage: null, status, upstream: null, latencyMs: performance.now() - startedAt });
    if (settled) await settled;
    if (stored === null)
      return refused(
        new GatewayError("not_found", `No stored response with id "${id.slice(0, 100)}"`, { param: "response_id" }),
        admission.identity,
        admission.headers,
      );
    return answer(200, admission.identity, JSON.stringify(stored.response), admission.headers);
  };
}
