/**
 * `modelgate serve`: the composition root. Loads the config, opens the database (migrations run
 * from inside the binary), builds the deps and the app, listens, and shuts down gracefully on
 * SIGTERM/SIGINT: stop accepting, let in-flight requests and streams finish (bounded by
 * server.shutdown_grace_ms), flush write-behind queues, close the database.
 */
import type { LoadedConfig } from "./config/load";
import { openDatabase } from "./db/client";
import { createApp } from "./app";
import type { AppDeps } from "./deps";
import { openGate } from "./auth/types";
import { ModelRegistry } from "./router/registry";
import { startDiscovery } from "./router/discover";
import { createRequestLog } from "./request-log";
import { VERSION } from "./version";

export interface ServeOptions {
  loaded: LoadedConfig;
  serviceId: number;
}

export async function serve({ loaded }: ServeOptions): Promise<void> {
  const { config } = loaded;
  const database = openDatabase(config.server.data_dir);
  const registry = new ModelRegistry(config);
  const requestLog = createRequestLog(database.db);
  const stops: Array<() => void | Promise<void>> = [];
  const deps: AppDeps = {
    config,
    db: database.db,
    registry,
    gate: openGate,
    now: Date.now,
    version: VERSION,
    startedAt: Date.now(),
    onRequestDone: (record) => requestLog.push(record),
    statusSections: [],
  };
  const app = createApp(deps);
  const { hostname, port } = parseListen(config.server.listen);
  app.listen({ hostname, port, maxRequestBodySize: config.server.max_body_bytes * 2 + 65_536, idleTimeout: 255 });
  const discovery = startDiscovery(registry, config.upstreams);
  stops.push(discovery.stop);
  log("info", `modelgate ${VERSION} listening on http://${hostname}:${app.server?.port ?? port}`, {
    config: loaded.source ?? "(embedded defaults)",
    data_dir: config.server.data_dir,
    models: registry.list().length,
  });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log("info", `${signal}: draining (up to ${config.server.shutdown_grace_ms} ms)`);
    const server = app.server!;
    const drained = server.stop(false);
    const grace = Bun.sleep(config.server.shutdown_grace_ms).then(() => "timeout" as const);
    if ((await Promise.race([drained, grace])) === "timeout") await server.stop(true);
    for (const stop of stops) await stop();
    requestLog.close();
    database.close();
    log("info", "stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
}

export function parseListen(listen: string): { hostname: string; port: number } {
  const index = listen.lastIndexOf(":");
  const hostname = listen.slice(0, index).replace(/^\[(.*)\]$/, "$1") || "0.0.0.0";
  return { hostname, port: Number(listen.slice(index + 1)) };
}

export function log(level: "debug" | "info" | "warn" | "error", msg: string, fields: Record<string, unknown> = {}): void {
  const line = JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields });
  if (level === "error" || level === "warn") console.error(line);
  else console.log(line);
}
