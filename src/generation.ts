/**
 * One config as the server serves it: its deps, its app and its discovery polls, a generation.
 * serve.ts composes the first once it listens and one more per reload (./reload.ts), then points
 * the listener at it with Bun's server.reload: requests already under way (streams included)
 * finish in the generation they began in, new ones arrive in the new one. A generation never
 * changes once composed; what must outlive a reload (the database, rate-limit buckets, queued
 * debits, metrics counters, the request log) is built once and handed in as Lasting.
 *
 * The model endpoints, /api/health and /v1/models are plain Bun routes (./plain-routes.ts); the
 * framework-served rest (./web.ts) is imported and built by the first request that reaches it,
 * once per generation, so an idle gateway holds none of it.
 */
import type { Server } from "bun";
import type { Config } from "./config/schema";
import type { Db } from "./db/client";
import type { AppDeps } from "./deps";
import type { RequestRecord } from "./requests/record";
import type { SpendAuthHook } from "./auth/types";
import type { GatewayMetrics } from "./metrics/gateway";
import type { RouteMemory } from "./router/remembered-routes";
import { gateFor, type IdentityState } from "./auth/identities";
import { buildDeps } from "./compose";
import type { App } from "./app";
import type { KeyReveals } from "./dashboard/key-reveals";
import { startDiscovery } from "./router/discover";
import { createFrontDoor, type FrontDoor } from "./router/front-door";
import { plainRoutes } from "./plain-routes";
import { errorResponse, GatewayError } from "./errors";
import { log } from "./log";

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
  door: FrontDoor;
  /** Answers a request no Bun route took, building the app first if no request has yet. */
  fetch(request: Request, server: Server<undefined>): Response | Promise<Response>;
}

/** The deps, model endpoints and app (built later) for `config`; `previous`, when a reload replaces it, lends its upstreams' state. */
export function composeGeneration(config: Config, lasting: Lasting, previous: Generation | null): Generation {
  const { db, now } = lasting;
  const gate = gateFor(lasting.identities, { db, config, now, spendAuth: lasting.spendAuth });
  const { deps } = buildDeps(config, {
    db,
    now,
    version: lasting.version,
    startedAt: lasting.startedAt,
    gate,
    metrics: lasting.metrics,
    requestDone: () => lasting.requestDone,
    statusSections: lasting.statusSections,
    previous: previous?.deps.registry,
  });
  // Served before the upstreams answer: the gateway may start before them (boot order, a restart).
  // On SQLite the read is done before the first request is taken (its promise settles within this
  // turn); on Postgres the routes appear once it answers.
  void lasting.routeMemory.restore(deps.registry, config.upstreams);
  const door = createFrontDoor(deps);
  return { config, deps, door, fetch: lazyApp(deps, door, lasting) };
}

/**
 * The fetch of an app built on first use. Requests that arrive while it is being built wait for
 * the same build; a build that fails is answered as an internal error and tried again by the next
 * request.
 */
function lazyApp(deps: AppDeps, door: FrontDoor, lasting: Lasting): Generation["fetch"] {
  let app: App | null = null;
  let building: Promise<App> | null = null;
  const build = async (server: Server<undefined>): Promise<App> => {
    const { buildWebApp } = await import("./web");
    const built = buildWebApp(deps, door, lasting);
    built.server = server;
    app = built;
    return built;
  };
  return (request, server) => {
    if (app) return app.fetch(request);
    building ??= build(server);
    return building.then(
      (built) => built.fetch(request),
      (error) => {
        building = null;
        log("error", "the app could not be built", { error: String((error as Error)?.message ?? error) });
        return errorResponse(new GatewayError("internal_error", "Internal error; the server could not build this page"));
      },
    );
  };
}

/** A generation being served: stop() ends its discovery polls when the next one takes over. */
export interface Serving {
  generation: Generation;
  stop(): void;
}

/**
 * Points `server` at `generation`: the model endpoints, /api/health and /v1/models as Bun routes
 * (the hot path skips the framework), everything else through the app, which is told which server
 * it runs in: its handlers read the client's address from it.
 */
export function serveGeneration(server: Server<undefined>, generation: Generation, lasting: Pick<Lasting, "routeMemory">): Serving {
  const { deps, config, door } = generation;
  const routes = { ...door.routes, ...plainRoutes(deps) };
  server.reload({ fetch: (request: Request) => generation.fetch(request, server), routes } as unknown as Parameters<typeof server.reload>[0]);
  const memory = lasting.routeMemory;
  const discovery = startDiscovery(deps.registry, config.upstreams, {
    discovered: memory.remember,
    shared: { leads: memory.leads, follow: (upstream) => memory.follow(deps.registry, upstream) },
  });
  return { generation, stop: discovery.stop };
}
