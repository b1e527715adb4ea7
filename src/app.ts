/**
 * createApp(deps): composes the feature controllers into one Elysia app. It never listens; the
 * server (src/serve.ts) and the tests decide how requests arrive. One onError renders every
 * failure in OpenAI's error shape, and every response carries x-request-id.
 */
import { log } from "./log";
import { Elysia, type ValidationError } from "elysia";
import type { AppDeps } from "./deps";
import { errorResponse, GatewayError } from "./errors";
import { databaseUnavailable } from "./db/engine";
import { startRequest, requestMeta } from "./requests/meta";
import { requestPath } from "./requests/url";
import { trustedProxies } from "./client-address";
import { violationError } from "./validation";
import { tooLarge, UNCOUNTED_BODY_BYTES } from "./body";
import { apiRoutes } from "./api";
import { createFrontDoor, type FrontDoor } from "./router/front-door";
import { modelRoutes } from "./router/routes";
import { swaggerRoutes } from "./swagger";
import { createCors, isCorsPath } from "./cors";

/** `door`: the model endpoints the server already serves as Bun routes (./generation.ts); built here when absent. */
export function createApp(deps: AppDeps, features: Elysia<any, any, any, any, any, any, any>[] = [], options: { door?: FrontDoor } = {}) {
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  const maxBody = deps.config.server.max_body_bytes;
  // Every route but the model endpoints (sign-in, sign-up, setup, dashboard forms, admin JSON) is
  // read whole by the framework, uncounted: held to the size of a body read uncounted.
  const formMax = Math.min(maxBody, UNCOUNTED_BODY_BYTES);
  const door = options.door ?? createFrontDoor(deps);
  const cors = createCors(deps.config.server.cors_origins);
  // When the server listens, the model endpoints are plain Bun routes: the hot path skips the
  // framework entirely. Requests that reach the app anyway (app.handle in tests, a path with a
  // trailing slash) are handed to the same functions before any of the framework's work.
  let app = new Elysia({ name: "modelgate", serve: { routes: door.routes } })
    .error({ GatewayError })
    .onRequest(({ request, set, server }) => {
      const endpoint = door.match(request);
      if (endpoint) return endpoint(request, server);
      const meta = startRequest(request, trusted);
      const path = requestPath(request.url);
      if (cors && isCorsPath(path)) {
        if (request.method === "OPTIONS") return cors.preflight(request, meta.id);
        cors.decorate(request, set.headers as Record<string, string>);
      }
      set.headers["x-request-id"] = meta.id;
      // No page of the gateway's (Swagger UI, the dashboard) is for framing by other sites, and no
      // answer is for sniffing as another type.
      set.headers["x-frame-options"] = "DENY";
      set.headers["x-content-type-options"] = "nosniff";
      const length = request.headers.get("content-length");
      if (length !== null && Number(length) > formMax) return render(tooLarge(formMax), meta.id);
      // Only the model endpoints read a body of unknown length with a limit; Elysia would buffer all
      // of it. Browsers and HTTP clients send forms and JSON with a Content-Length.
      if (length === null && request.headers.has("transfer-encoding")) {
        return render(
          new GatewayError("length_required", "Send this request's body with a Content-Length header", { headers: { connection: "close" } }),
          meta.id,
        );
      }
    })
    .onError(({ code, error, request }) => {
      const id = requestMeta(request).id;
      if (error instanceof GatewayError) return render(error, id);
      if (code === "VALIDATION") return render(violationError((error as ValidationError).all?.[0]), id);
      if (code === "PARSE") {
        // Our body reader throws GatewayError (413, 400); Elysia wraps what a parser throws.
        const cause = (error as Error).cause;
        return render(cause instanceof GatewayError ? cause : new GatewayError("invalid_request_error", "The request body is not valid JSON"), id);
      }
      if (code === "NOT_FOUND") return render(new GatewayError("not_found", `No route for ${request.method} ${requestPath(request.url)}`), id);
      const unavailable = databaseUnavailable(error);
      log("error", unavailable ? "database unreachable" : "unhandled error", { request_id: id, error: String((error as Error)?.message ?? error) });
      return render(unavailable ?? new GatewayError("internal_error", `Internal error; quote request id ${id} when reporting it`), id);
    })
    .use(swaggerRoutes())
    .use(apiRoutes(deps))
    .use(modelRoutes(deps, door.byPath));
  for (const feature of features) app = app.use(feature);
  return app;
}

export type App = ReturnType<typeof createApp>;

function render(error: GatewayError, requestId: string): Response {
  return errorResponse(error, { "x-request-id": requestId });
}
