/**
 * GET /metrics: the Prometheus scrape endpoint. With `[metrics] token` set, a scrape must send
 * `Authorization: Bearer <token>` (compared in constant time over SHA-256 digests, so neither the
 * token nor its length leaks); without it the endpoint is open. `[metrics] enabled = false`
 * removes the route.
 */
import { Elysia } from "elysia";
import { sha256 } from "@oslojs/crypto/sha2";
import { constantTimeEqual } from "@oslojs/crypto/subtle";
import type { Config } from "../config/schema";
import { GatewayError } from "../errors";
import { bearerToken } from "../auth/tokens";
import type { GatewayMetrics } from "./gateway";

const encoder = new TextEncoder();

export function metricsRoutes(config: Config["metrics"], metrics: GatewayMetrics) {
  const app = new Elysia({ name: "modelgate.metrics" });
  if (!config.enabled) return app;
  const expected = config.token ? sha256(encoder.encode(config.token)) : null;
  return app.get(
    "/metrics",
    ({ request }) => {
      if (expected && !bearerMatches(request.headers.get("authorization"), expected)) {
        throw new GatewayError("authentication_required", "GET /metrics needs the bearer token configured in [metrics] token", {
          headers: { "www-authenticate": 'Bearer realm="metrics"' },
        });
      }
      return new Response(metrics.render(), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
    },
    { detail: { summary: "Prometheus metrics (text exposition format)", tags: ["service"] } },
  );
}

function bearerMatches(header: string | null, expected: Uint8Array): boolean {
  const token = bearerToken(header);
  return token !== null && constantTimeEqual(sha256(encoder.encode(token)), expected);
}
