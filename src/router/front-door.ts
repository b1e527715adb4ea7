/**
 * The one way into every /v1 model endpoint (./adapters/index.ts): for each path, its endpoint
 * with CORS (preflights answered, answers and errors decorated). The server mounts these as plain
 * Bun routes; the app's first hook hands the same requests to the same functions when they arrive
 * through app.handle (tests) or with a trailing slash. So limits, CORS, trusted proxies and error
 * pages are built once, here and in ./endpoint.ts.
 */
import type { AppDeps } from "../deps";
import { createCors } from "../cors";
import { requestMeta } from "../requests/meta";
import { trustedProxies } from "../client-address";
import { requestPath } from "../requests/url";
import { ADAPTERS } from "./adapters";
import { createResponsesAdapter } from "./adapters/responses";
import { createEndpoint, type ModelEndpoint } from "./endpoint";

export interface FrontDoor {
  /** Bun routes: each path's POST (and OPTIONS with CORS on). */
  routes: Record<string, Partial<Record<"POST" | "OPTIONS", ModelEndpoint>>>;
  /** The endpoint function for a request to one of the paths, or null. */
  match(request: Request): ModelEndpoint | null;
  /** Each path's endpoint, CORS included (the OpenAPI routes call them). */
  byPath: ReadonlyMap<string, ModelEndpoint>;
}

export function createFrontDoor(deps: AppDeps): FrontDoor {
  const cors = createCors(deps.config.server.cors_origins);
  const trusted = trustedProxies(deps.config.server.trusted_proxies);
  const routes: FrontDoor["routes"] = {};
  const byPath = new Map<string, ModelEndpoint>();
  // The Responses endpoint keeps what it stores in the deps' database: built per app.
  for (const adapter of [...ADAPTERS, createResponsesAdapter(deps)]) {
    const endpoint = createEndpoint(deps, adapter);
    const served: ModelEndpoint = cors
      ? async (request, server) => {
          const response = await endpoint(request, server);
          cors.decorate(request, response.headers);
          return response;
        }
      : endpoint;
    for (const path of adapter.paths) {
      byPath.set(path, served);
      routes[path] = cors ? { POST: served, OPTIONS: async (request) => cors.preflight(request, requestMeta(request, trusted).id) } : { POST: served };
    }
  }
  return {
    routes,
    byPath,
    match(request) {
      const method = request.method;
      if (method !== "POST" && !(method === "OPTIONS" && cors)) return null;
      const path = requestPath(request.url);
      const endpoint = byPath.get(path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path);
      if (!endpoint) return null;
      return method === "POST" ? endpoint : routes[path.replace(/\/$/, "")]!.OPTIONS!;
    },
  };
}
