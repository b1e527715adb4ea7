/**
 * GET /metrics: the Prometheus scrape endpoint. With `[metrics] token` set, a scrape must send
 * `Authorization: Bearer <token>` (compared in constant time over SHA-256 digests, so neither the
 * token nor its length leaks); without it the endpoint is open. `[metrics] enabled = false`
 * removes the route.
 */
import { Elysia } from "elysia";
import type { Config } from "../config/schema";
import { GatewayError } from "../errors";
import { bearerToken, equalSecrets, sha256Hex } from "../auth/tokens";
import type { GatewayMetrics } from "./gateway";
import { errorDoc } from "../swagger";

export function metricsRoutes(config: Config["metrics"], metrics: GatewayMetrics) {
  const app = new Elysia({ name: "modelgate.metrics" });
  if (!config.enabled) return app;
  const expected = config.token ? sha256Hex(config.token) : null;
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
    {
      detail: {
        summary: "Prometheus metrics (text exposition format)",
        tags: ["service"],
        security: [{ metricsToken: [] }, {}],
        responses: {
          200: { description: "The metrics", content: { "text/plain": { schema: { type: "string" } } } },
          401: errorDoc("[metrics] token is set and the request did not send it"),
        },
      },
    },
  );
}

function bearerMatches(header: string | null, expectedHash: string): boolean {
  const token = bearerToken(header);
  return token !== null && equalSecrets(sha256Hex(token), expectedHash);
}
