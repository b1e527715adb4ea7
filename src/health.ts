/**
 * GET /api/health, the liveness check, answered without the framework: a supervisor or a load
 * balancer asks it every few seconds, and the server serves it as a plain Bun route so that an
 * idle gateway never builds the app (./generation.ts). The answer is the one the app's own route
 * gives (./api.ts, for a trailing slash or a HEAD): the same body, request id, and headers.
 */
import type { Cors } from "./cors";
import type { TrustedProxies } from "./client-address";
import { startRequest } from "./requests/meta";
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

/** The Bun route's handler: the headers the app's first hook would set (src/app.ts), CORS included. */
export function healthRoute(options: { version: string; cors: Cors | null; trusted: TrustedProxies }): (request: Request) => Response {
  const { version, cors, trusted } = options;
  return (request) => {
    const headers: Record<string, string> = {
      "x-request-id": startRequest(request, trusted).id,
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
    };
    cors?.decorate(request, headers);
    return Response.json(healthBody(version), { headers });
  };
}
