/**
 * The GET routes the server answers without the framework, beside the model endpoints: the
 * liveness check a supervisor or load balancer asks every few seconds (/api/health) and the model
 * list every OpenAI client asks for (/v1/models). Served as plain Bun routes, they leave an idle
 * gateway without the app (./generation.ts builds it on the first request that needs it). Each
 * answer is the one the app's route gives (./api.ts, ./router/routes.ts; reached with a trailing
 * slash or through app.handle): the same body, request id and headers, CORS included.
 */
import type { AppDeps } from "./deps";
import { createCors } from "./cors";
import { trustedProxies } from "./client-address";
import { startRequest } from "./requests/meta";
import { modelList } from "./router/model-list";
import { COMMIT } from "./version";

export interface HealthBody {
  status: "ok";
  timestamp: number;
  version: string;
  commit: string;
}

export function healthBody(version: string): HealthBody {
  return { status: "ok", timestamp: Date.now(), version, commit: COMMIT };
}

type PlainRoutes = Record<"/api/health" | "/v1/models", { GET: (request: Request) => Response | Promise<Response> }>;

export function plainRoutes(deps: AppDeps): PlainRoutes {
  const cors = createCors(deps.config.server.cors_origins);
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  /** The headers the app's first hook sets (src/app.ts). */
  const json = (request: Request, body: unknown): Response => {
    const headers: Record<string, string> = {
      "x-request-id": startRequest(request, trusted).id,
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
    };
    cors?.decorate(request, headers);
    return Response.json(body, { headers });
  };
  return {
    "/api/health": { GET: (request) => json(request, healthBody(deps.version)) },
    "/v1/models": { GET: async (request) => json(request, await modelList(deps, request)) },
  };
}
