/**
 * One /v1 model endpoint as one function from Request to Response: request id, body limits (per
 * request and in flight together), reading and checking the body as its adapter says (JSON, or a
 * multipart upload streamed through), the route and whether it serves this endpoint, the pipeline
 * (./pipeline.ts), and error rendering in the adapter's shape. A request refused before the pipeline
 * is recorded here (log line, request-log row, metrics), everything after it there. The server
 * mounts it as a plain Bun route and app.handle reaches the same function (./front-door.ts), so
 * no framework work sits on the hot path and tests run the path production runs.
 */
import type { AppDeps } from "../deps";
import { errorResponse, GatewayError } from "../errors";
import { databaseUnavailable } from "../db/engine";
import { BodyBudget, declaredLength, parseJsonBody, readJsonBody } from "../body";
import { requestMeta, type RequestMeta } from "../requests/meta";
import { trustedProxies } from "../client-address";
import { handleCall } from "./pipeline";
import { refusalRecord } from "./served";
import { hundredths, log } from "../log";
import { createCors, fromForeignPage } from "../cors";
import { readUpload, type Upload } from "./upload";
import type { CallBody, EndpointAdapter } from "./adapters/types";

type Server = Parameters<RequestMeta["clientIp"]>[0];
export type ModelEndpoint = (request: Request, server: Server) => Promise<Response>;

/** Refusals made before the gate admits a request (a bad body, an unknown model); not 411 or 413, whose unread body closes the connection. */
const REFUSED_BEFORE_ADMISSION = new Set([400, 404]);

export function createEndpoint(deps: AppDeps, adapter: EndpointAdapter): ModelEndpoint {
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  const maxBody = deps.config.server.max_body_bytes;
  const budget = new BodyBudget(deps.config.server.max_body_bytes_in_flight);
  const cors = createCors(deps.config.server.cors_origins);
  const render = (error: GatewayError, headers: Record<string, string>): Response => (adapter.renderError ?? errorResponse)(error, headers);
  return async function serveEndpoint(request, server) {
    const meta = requestMeta(request, trusted);
    /** From the call of handleCall on, every outcome is recorded there; refusals before it, here. */
    let handled = false;
    let upload: Upload | null = null;
    try {
      if (fromForeignPage(request, cors, deps.config.server.public_url)) {
        throw new GatewayError(
          "forbidden",
          "This API does not take requests from pages of other origins; list the page's origin in server.cors_origins to allow it",
        );
      }
      let body: CallBody;
      let bodyBytes: number;
      const declared = declaredLength(request);
      if (adapter.input === "json") {
        if (isMultipart(request.headers.get("content-type"))) throw expectsJson();
        const read = await readJsonBody(request, maxBody, declared, budget);
        const parsed = typeof read === "string" ? parseJsonBody(read, maxBody) : read.value;
        // Text comes only from a body whose length was declared (up to 64 KiB).
        bodyBytes = typeof read === "string" ? declared : read.bytes;
        adapter.check(parsed);
        body = parsed;
      } else {
        upload = await readUpload(request, maxBody);
        body = { model: upload.model };
        bodyBytes = Number.isFinite(declared) ? declared : 0;
      }
      const route = deps.registry.resolve(body.model);
      if (!route) {
        throw new GatewayError("model_not_found", `The model "${body.model}" does not exist; GET /v1/models lists the available models`, { param: "model" });
      }
      if (!route.endpoints.includes(adapter.name)) {
        throw new GatewayError(
          "invalid_request_error",
          `The model "${route.id}" does not serve ${adapter.paths[0]} (the ${adapter.name} endpoint); it serves: ${route.endpoints.join(", ")}`,
          {
            param: "model",
          },
        );
      }
      const checked = adapter.checkRoute?.(body, route);
      if (checked) await checked;
      handled = true;
      return await handleCall(deps, {
        request,
        adapter,
        upload,
        route,
        body,
        bodyBytes,
        requestId: meta.id,
        startedAt: meta.startedAt,
        clientIp: () => meta.clientIp(server),
      });
    } catch (err) {
      upload?.dispose();
      if (err instanceof GatewayError) {
        // Refused before admission (a bad body, an unknown model): an invalid credential is answered
        // first, and it is recorded here like any other request (handleCall recorded the rest).
        let refusal = err;
        if (!handled) {
          if (REFUSED_BEFORE_ADMISSION.has(err.status)) refusal = (await deps.gate.credentialRefusal?.(request)) ?? err;
          deps.onRequestDone(refusalRecord(request, meta.id, meta.startedAt, refusal, adapter.name));
        }
        const overhead = hundredths(performance.now() - meta.startedAt);
        // The connection waits out a hostile body's hold before it can send again (src/body.ts).
        if (err.options.holdMs) await Bun.sleep(err.options.holdMs);
        return render(refusal, { "x-request-id": meta.id, "x-gateway-overhead-ms": overhead });
      }
      // A client that left while sending its body: nobody to answer, and nothing went wrong here.
      if (request.signal.aborted && !handled) {
        const gone = new GatewayError("client_closed_request", "the client closed the connection before its body arrived");
        deps.onRequestDone(refusalRecord(request, meta.id, meta.startedAt, gone, adapter.name));
        return render(gone, { "x-request-id": meta.id });
      }
      const unavailable = databaseUnavailable(err);
      log("error", unavailable ? `database unreachable in ${adapter.paths[0]}` : `unhandled error in ${adapter.paths[0]}`, {
        request_id: meta.id,
        error: String((err as Error)?.message ?? err),
      });
      return render(unavailable ?? new GatewayError("internal_error", `Internal error; quote request id ${meta.id} when reporting it`), {
        "x-request-id": meta.id,
      });
    }
  };
}

/** A multipart Content-Type (matched without a copy of the header on the usual JSON request). */
function isMultipart(contentType: string | null): boolean {
  return contentType !== null && (contentType.charCodeAt(0) | 32) === 109 && /^multipart\//i.test(contentType);
}

function expectsJson(): GatewayError {
  return new GatewayError("invalid_request_error", "This endpoint takes a JSON body (Content-Type: application/json), not a multipart upload", {
    param: "content-type",
  });
}
