/**
 * One config as the server serves it: its deps, its app and its discovery polls, a generation.
 * serve.ts composes the first once it listens and one more per reload (./reload.ts), then points
 * the listener at it with Bun's server.reload: requests already under way (streams included)
 * finish in the generation they began in, new ones arrive in the new one. A generation never
 * changes once composed; what must outlive a reload (the database, rate-limit buckets, queued
 * debits, metrics counters, the request log) is built once and handed in as Lasting.
 */
import type { Server } from "bun";
import type { Config } from "./config/schema";
import type { Db } from "./db/client";
import type { AppDeps } from "./deps";
import type { RequestRecord } from "./requests/record";
import type { SpendAuthHook } from "./auth/types";
import type { GatewayMetrics } from "./metrics/gateway";
import type { RouteMemory } from "./router/remembered-routes";
import { identitiesFor, type IdentityState } from "./auth/identities";
import { buildDeps } from "./compose";
import { createApp, type App } from "./app";
import { metricsRoutes } from "./metrics/routes";
import { dashboardRoutes } from "./dashboard";
import type { KeyReveals } from "./dashboard/key-reveals";
import { startDiscovery } from "./router/discover";

/** What every generation of one server process shares. */
export interface Lasting {
  db: Db;
  now: () => number;
  version: string;
  startedAt: number;
  identities: IdentityState;
  spendAuth?: SpendAuthHook;
  metrics: GatewayMetrics;
  requestDone: (record: RequestRecord) => void;
  routeMemory: RouteMemory;
  /** New keys waiting for their one showing in the dashboard. */
  reveals: KeyReveals;
  statusSections: AppDeps["statusSections"];
}

export interface Generation {
  config: Config;
  deps: AppDeps;
  app: App;
}

/** The deps and app for `config`; `previous`, when a reload replaces it, lends its upstreams' state. */
export function composeGeneration(config: Config, lasting: Lasting, previous: Generation | null): Generation {
  const { db, now } = lasting;
  const identities = identitiesFor(lasting.identities, { db, config, now, spendAuth: lasting.spendAuth });
  const { deps } = buildDeps(config, {
    db,
    now,
    version: lasting.version,
    startedAt: lasting.startedAt,
    gate: identities.gate,
    metrics: lasting.metrics,
    requestDone: () => lasting.requestDone,
    statusSections: lasting.statusSections,
    previous: previous?.deps.registry,
  });
  // Served before the upstreams answer: the gateway may start before them (boot order, a restart).
  // On SQLite the read is done before the first request is taken (its promise settles within this
  // turn); on Postgres the routes appear once it answers.
  void lasting.routeMemory.restore(deps.registry, config.upstreams);
  const app = createApp(deps, [identities.routes, metricsRoutes(config.metrics, lasting.metrics), dashboardRoutes(deps, { reveals: lasting.reveals })]);
  return { config, deps, app };
}

/** A generation being served: stop() ends its discovery polls when the next one takes over. */
export interface Serving {
  generation: Generation;
  stop(): void;
}

/**
 * Points `server` at `generation`: the model endpoints as Bun routes (the hot path skips the
 * framework), everything else through the app. The app is told which server it runs in, which
 * its handlers read the client's address from.
 */
export function serveGeneration(server: Server<undefined>, generation: Generation, lasting: Pick<Lasting, "routeMemory">): Serving {
  const { app, deps, config } = generation;
  app.server = server;
  const routes = (app.config.serve as { routes?: Record<string, unknown> } | undefined)?.routes ?? {};
  server.reload({ fetch: app.fetch, routes } as unknown as Parameters<typeof server.reload>[0]);
  const memory = lasting.routeMemory;
  const discovery = startDiscovery(deps.registry, config.upstreams, {
    discovered: memory.remember,
    shared: { leads: memory.leads, follow: (upstream) => memory.follow(deps.registry, upstream) },
  });
  return { generation, stop: discovery.stop };
}
