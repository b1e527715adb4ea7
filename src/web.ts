/**
 * The framework-served part of one generation (./generation.ts): the Elysia app with /api, Swagger,
 * the auth API, /metrics and the dashboard. Imported and built on the first request that needs it,
 * so a gateway that has answered only health checks and model calls never loads the framework,
 * its route tree or the pages: about 5 MB it would hold while idle (docs/benchmarks.md, Footprint).
 */
import { createApp, type App } from "./app";
import { authRoutes } from "./auth/routes";
import { metricsRoutes } from "./metrics/routes";
import { dashboardRoutes } from "./dashboard";
import type { AppDeps } from "./deps";
import type { FrontDoor } from "./router/front-door";
import type { IdentityState } from "./auth/identities";
import type { GatewayMetrics } from "./metrics/gateway";
import type { KeyReveals } from "./dashboard/key-reveals";

/** What the web app takes from the parts that outlive a generation (../generation.ts Lasting). */
export interface WebLasting {
  identities: Pick<IdentityState, "throttle">;
  metrics: GatewayMetrics;
  reveals: KeyReveals;
}

export function buildWebApp(deps: AppDeps, door: FrontDoor, lasting: WebLasting): App {
  const { db, now, config } = deps;
  const features = [
    authRoutes({ db, config, now, throttle: lasting.identities.throttle }),
    metricsRoutes(config.metrics, lasting.metrics),
    dashboardRoutes(deps, { reveals: lasting.reveals }),
  ];
  return createApp(deps, features, { door });
}
