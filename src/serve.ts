/**
 * `modelgate serve`: the composition root. Loads the config, opens the database (migrations run
 * from inside the binary), builds the deps and the app, listens, and shuts down gracefully on
 * SIGTERM/SIGINT/SIGHUP: stop accepting, let in-flight requests and streams finish (bounded by
 * server.shutdown_grace_ms), flush write-behind queues (retrying for up to the grace while the
 * database refuses), close the database.
 */
import type { LoadedConfig } from "./config/load";
import { openDatabase } from "./db/client";
import { normalizeStoredEmails } from "./auth/users";
import { stampLegacyLinks } from "./auth/oauth";
import { createApp } from "./app";
import { buildDeps } from "./compose";
import { buildIdentities } from "./auth/wire";
import { createMemoryLimiter } from "./ratelimit/memory";
import { spendAuthMode } from "./spendauth/mode";
import { issueSetupLink } from "./auth/setup";
import { startDiscovery } from "./router/discover";
import { createRouteMemory } from "./router/remembered-routes";
import { createRequestLog } from "./request-log";
import { createRequestSink } from "./request-sink";
import { createLogger, log, setLogger } from "./log";
import { metricsRoutes } from "./metrics/routes";
import { dashboardRoutes } from "./dashboard";
import { COMMIT, VERSION } from "./version";
import { formatCredits } from "./credits/amount";
import { listenNaming, listenUrl, parseAddress, reachableUrl, stopWithin } from "./listen";

export interface ServeOptions {
  loaded: LoadedConfig;
  serviceId: number;
}

export async function serve({ loaded, serviceId }: ServeOptions): Promise<void> {
  const { config } = loaded;
  const logger = createLogger(config.log);
  setLogger(logger);
  const database = openDatabase(config.server.data_dir);
  for (const tag of database.applied) log("info", `database: applied migration ${tag}`, { file: database.sqlite.filename });
  for (const { id, email } of normalizeStoredEmails(database.db)) {
    log("warn", `user ${id}'s stored email cannot be signed in to: its lookup form is taken by another account or is not an address (disable one of them, or give the account a new user)`, { user_id: id, email });
  }
  const stamped = stampLegacyLinks(database.db, config);
  if (stamped > 0) log("info", `oauth: ${stamped} sign-in link(s) stored before links named their provider's server are taken to come from the server configured now`);
  const requestLog = createRequestLog(database.db, { retainDays: config.server.request_log_days, now: Date.now });
  const finished = createRequestSink({
    observe: config.metrics.enabled ? (record) => metrics.observe(record) : null,
    logLines: logger.requests,
    insert: requestLog.insert,
  });
  const stops: Array<() => void | Promise<void>> = [];
  let exitCode = 0;
  // SpendAuth shares the gateway's rate limiter (limits.spend_auth per commitment).
  const limiter = createMemoryLimiter({ now: Date.now });
  // Loaded only when configured: viem alone costs ~20 MB of memory and ~30 ms of start-up.
  const spendAuth = spendAuthMode(config) === "off"
    ? null
    : (await import("./spendauth/setup")).setupSpendAuth({ config, db: database.db, now: Date.now, limiter, log });
  if (spendAuth) {
    stops.push(async () => {
      // A served authorization never written is a payment never claimed: like a lost debit.
      if ((await spendAuth.stop()) > 0) exitCode = 1;
    });
  }
  const identities = buildIdentities({ db: database.db, config, now: Date.now, limiter, spendAuth: spendAuth?.hook });
  stops.push(async () => {
    // A debit the database still refuses after the grace is lost: say so, and exit non-zero.
    const unwritten = await identities.close(config.server.shutdown_grace_ms);
    if (unwritten.length === 0) return;
    exitCode = 1;
    const micro = unwritten.reduce((sum, d) => sum + d.micro, 0);
    log("error", `credits: ${unwritten.length} queued debit(s), ${formatCredits(micro)} credits in all, could not be written before the stop and are lost`, {
      users: [...new Set(unwritten.map((d) => d.userId))],
    });
  });
  let webhookStatus: (() => Record<string, unknown>) | null = null;
  const { deps, metrics } = buildDeps(config, {
    db: database.db,
    now: Date.now,
    version: VERSION,
    startedAt: Date.now(),
    gate: identities.gate,
    requestDone: () => finished.push,
    beforeMetricsRender: () => finished.flush(),
    statusSections: [
      spendAuth ? spendAuth.statusSection : () => ({ spend_auth: { mode: "off" } }),
      // Webhooks start once the server listens; until then they add nothing to /api/status.
      () => webhookStatus?.() ?? {},
    ],
  });
  const { registry } = deps;
  // Served before the upstreams answer: the gateway may start before them (boot order, a restart).
  const routeMemory = createRouteMemory(database.db, { now: Date.now, log });
  routeMemory.restore(registry, config.upstreams);
  const app = createApp(deps, [identities.routes, metricsRoutes(config.metrics, metrics), dashboardRoutes(deps)]);
  const { hostname, port } = parseAddress(config.server.listen);
  // Elysia asks for SO_REUSEPORT and development mode by default: a second server on the same port
  // would then share its connections (and split the rate limits and reservations), and an error
  // escaping a handler would be answered with a stack trace. Bun's own body cap answers 413
  // without a body; the app refuses a declared length over max_body_bytes before reading, and
  // counts a chunked chat body as it arrives (src/app.ts, src/body.ts), so Bun's is out of reach.
  listenNaming("server.listen", config.server.listen, () =>
    app.listen({ hostname, port, reusePort: false, development: false, maxRequestBodySize: Number.MAX_SAFE_INTEGER, idleTimeout: 255 }),
  );
  const discovery = startDiscovery(registry, config.upstreams, { discovered: routeMemory.remember });
  stops.push(discovery.stop);
  if (config.webhooks.enabled) {
    const { startWebhooks } = await import("./webhooks");
    const { createModelCaller } = await import("./router/in-process");
    const webhooks = startWebhooks(config, { serviceId, log, secretValues: loaded.secretValues, secretEnv: loaded.secretEnv, callModel: createModelCaller(deps) });
    stops.push(webhooks.stop);
    webhookStatus = webhooks.status;
    metrics.registerGauge(webhooks.outboxGauge);
  }
  const listening = app.server?.port ?? port;
  // A port of 0 was chosen by the system just now: links (the setup link, OAuth callbacks) and
  // Origin checks follow it (they read public_url per request; only its scheme is read before).
  if (port === 0 && loaded.linksFollowListen) config.server.public_url = reachableUrl(hostname, listening);
  const setupLink = issueSetupLink(database.db, { now: Date.now(), publicUrl: config.server.public_url });
  if (setupLink) log("warn", `no administrator yet: open ${setupLink} to create one (works once, within 24 hours)`);
  log("info", `modelgate ${VERSION} (commit ${COMMIT}) listening on ${listenUrl(hostname, listening)}`, {
    config: loaded.source ?? "(embedded defaults)",
    data_dir: config.server.data_dir,
    configured_models: registry.list().length,
  });

  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log("info", `${signal}: draining (up to ${config.server.shutdown_grace_ms} ms)`);
    await stopWithin(app.server!, config.server.shutdown_grace_ms);
    // Everything written behind (debits, settlements, the request log) retries side by side, each
    // for up to the grace, so a stop under a lock takes one grace, not one per part.
    const [, unlogged] = await Promise.all([Promise.all(stops.map((stop) => stop())), finished.closeWithin(config.server.shutdown_grace_ms)]);
    if (unlogged.length > 0) {
      exitCode = 1;
      log("error", `request log: ${unlogged.length} row(s) could not be written before the stop and are lost`);
    }
    requestLog.close();
    database.close();
    log("info", "stopped");
    process.exit(exitCode);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  // A closing terminal, or a unit's `kill -HUP`: there is no reload, and the default would exit
  // at once, losing the queued debits and request-log rows. It stops like SIGTERM.
  process.on("SIGHUP", () => void shutdown("SIGHUP"));
}


export { log } from "./log";
