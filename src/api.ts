/**
 * Unauthenticated service endpoints: GET /api/health (liveness) and GET /api/status (release and
 * build commit, uptime, interface version, model and upstream health, and sections from optional parts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "./deps";
import { COMMIT, INTERFACE_VERSION } from "./version";
import { healthBody } from "./plain-routes";
import { upstreamHealth } from "./router/upstream-health";
import { jsonDoc } from "./swagger";
import type { OpenAPIV3 } from "openapi-types";

const HEALTH_SCHEMA: OpenAPIV3.SchemaObject = {
  type: "object",
  required: ["status", "timestamp"],
  properties: {
    status: { type: "string", example: "ok" },
    timestamp: { type: "number", description: "Milliseconds since the epoch" },
    version: { type: "string", description: "The release" },
    commit: { type: "string", description: 'The commit the binary was built from, or "unknown"' },
  },
};

export function apiRoutes(deps: AppDeps) {
  return new Elysia({ name: "modelgate.api" })
    .get("/api/health", () => healthBody(deps.version), {
      detail: { operationId: "getHealth", summary: "Liveness", tags: ["service"], responses: { 200: jsonDoc("The service is up", HEALTH_SCHEMA) } },
    })
    .get(
      "/api/status",
      async () => {
        const now = deps.now();
        const upstreams = [...deps.registry.upstreams.values()].map((u) => upstreamHealth(u, now));
        const status: Record<string, unknown> = {
          status: upstreams.every((u) => u.state !== "open") ? "ok" : "degraded",
          version: deps.version,
          commit: COMMIT,
          interface_version: INTERFACE_VERSION,
          uptime_s: Math.floor((Date.now() - deps.startedAt) / 1000),
          models: deps.registry.list().length,
          upstreams,
        };
        for (const section of deps.statusSections) Object.assign(status, await section());
        return status;
      },
      {
        detail: {
          operationId: "getStatus",
          summary: "Service status",
          tags: ["service"],
          responses: { 200: jsonDoc("Release and build commit, uptime, interface version, model and upstream health, and the optional parts' sections") },
        },
      },
    );
}
