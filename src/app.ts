/**
 * createApp(deps): composes the feature controllers into one Elysia app. It never listens; the
 * server (src/serve.ts) and the tests decide how requests arrive. One onError renders every
 * failure in OpenAI's error shape, and every response carries x-request-id.
 */
import { Elysia, type ValidationError } from "elysia";
import type { AppDeps } from "./deps";
import { errorBody, GatewayError } from "./errors";
import { startRequest, requestMeta } from "./request-meta";
import { apiRoutes } from "./api";
import { modelRoutes } from "./router/routes";
import { swaggerRoutes } from "./swagger";

export function createApp(deps: AppDeps, features: Elysia<any, any, any, any, any, any, any>[] = []) {
  const trusted = new Set(deps.config.server.trusted_proxies);
  const maxBody = deps.config.server.max_body_bytes;
  let app = new Elysia({ name: "modelgate" })
    .error({ GatewayError })
    .onRequest(({ request, set }) => {
      const meta = startRequest(request, trusted);
      set.headers["x-request-id"] = meta.id;
      const declared = Number(request.headers.get("content-length") ?? 0);
      if (declared > maxBody) {
        return render(new GatewayError("payload_too_large", `The request body is larger than the limit of ${maxBody} bytes`), meta.id);
      }
    })
    .onError(({ code, error, request }) => {
      const id = requestMeta(request).id;
      if (error instanceof GatewayError) return render(error, id);
      if (code === "VALIDATION") return render(new GatewayError("invalid_request_error", validationMessage(error as ValidationError)), id);
      if (code === "PARSE") {
        // Our body reader throws GatewayError (413, 400); Elysia wraps what a parser throws.
        const cause = (error as Error).cause;
        return render(cause instanceof GatewayError ? cause : new GatewayError("invalid_request_error", "The request body is not valid JSON"), id);
      }
      if (code === "NOT_FOUND") return render(new GatewayError("not_found", `No route for ${request.method} ${new URL(request.url).pathname}`), id);
      console.error(JSON.stringify({ level: "error", request_id: id, msg: "unhandled error", error: String((error as Error)?.message ?? error) }));
      return render(new GatewayError("internal_error", `Internal error; quote request id ${id} when reporting it`), id);
    })
    .use(swaggerRoutes())
    .use(apiRoutes(deps))
    .use(modelRoutes(deps));
  for (const feature of features) app = app.use(feature);
  return app;
}

export type App = ReturnType<typeof createApp>;

function render(error: GatewayError, requestId: string): Response {
  return new Response(JSON.stringify(errorBody(error)), {
    status: error.status,
    headers: { "content-type": "application/json", "x-request-id": requestId, ...error.options.headers },
  });
}

/** The first schema violation as `path: reason`, e.g. `messages[0].role: must be one of ...`. */
function validationMessage(error: ValidationError): string {
  const first = error.all?.[0] as { path?: string; message?: string; schema?: { anyOf?: { const?: unknown }[] } } | undefined;
  if (!first) return "The request body does not match the ChatCompletionRequest schema";
  const path = (first.path ?? "").split("/").filter(Boolean)
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
  const options = first.schema?.anyOf;
  const reason = options?.every((o) => "const" in o)
    ? `must be one of ${options.map((o) => o.const).join(", ")}`
    : (first.message ?? "is invalid").replace(/^Expected/, "expected");
  return `Invalid request body: ${path || "body"}: ${reason}`;
}
