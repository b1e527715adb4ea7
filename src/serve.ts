/**
 * `modelgate serve`: the composition root. Loads the config, opens the database (migrations run
 * from inside the binary), builds what lasts as long as the process (the database, rate limits,
 * queued debits, metrics, the request log), listens, then serves one generation of the config at
 * a time (./generation.ts). SIGHUP (`modelgate reload`) reads the config file again and serves a
 * new generation (./reload.ts says what waits for a restart); a config that fails its checks is
 * refused and the running one serves on. SIGTERM/SIGINT stop gracefully: stop accepting, let
 * in-flight requests and streams finish (bounded by server.shutdown_grace_ms), flush write-behind
 * queues (retrying for up to the grace while the database refuses), close the database.
 */
import { ConfigError, loadConfig, type LoadedConfig } from "./config/load";
import { mkdirSync } from "node:fs";
import { openStorage, storageStatusSection } from "./db/open";
import { normalizeStoredEmails } from "./auth/stored-emails";
import { stampLegacyLinks } from "./auth/oauth";
import { createIdentityState } from "./auth/identities";
import { createMemoryLimiter } from "./ratelimit/memory";
import { spendAuthMode } from "./spendauth/mode";
import { issueSetupLink } from "./auth/setup";
import { createRouteMemory } from "./router/remembered-routes";
import { createRequestLog } from "./requests/log";
import { createRequestSink } from "./requests/sink";
import { startResponsePruning } from "./router/response-store";
import { createLogger, log, setLogger } from "./log";
import { createGatewayMetrics } from "./metrics/gateway";
import { createKeyReveals } from "./dashboard/key-reveals";
import { COMMIT, VERSION } from "./version";
import { formatCredits } from "./credits/amount";
import { listenNaming, listenUrl, parseAddress, stopWithin } from "./listen";
import { composeGeneration, serveGeneration, type Generation, type Lasting, type Serving } from "./generation";
import { servedConfig, type Bound } from "./reload";
import { writePidFile, writeReloadOutcome } from "./pid-file";
import type { WebhooksService } from "./webhooks";

export interface ServeOptions {
  loaded: LoadedConfig;
  serviceId: number;
}

export async function serve({ loaded, serviceId }: ServeOptions): Promise<void> {
  const started = loaded.config;
  const logger = createLogger(started.log);
  setLogger(logger);
  const database = await openStorage({ dataDir: started.server.data_dir, url: started.database.url, poolSize: started.database.pool_size });
  for (const tag of database.applied) log("info", `database: applied migration ${tag}`, { where: database.where });
  if (database.engine === "postgres") makeDataDir(started.server.data_dir);
  for (const { id, email } of await normalizeStoredEmails(database.db)) {
    log(
      "warn",
      `user ${id}'s stored email cannot be signed in to: its lookup form is taken by another account or is not an address (disable one of them, or give the account a new user)`,
      { user_id: id, email },
    );
  }
  const stamped = await stampLegacyLinks(database.db, started);
  if (stamped > 0)
    log("info", `oauth: ${stamped} sign-in link(s) stored before links named their provider's server are taken to come from the server configured now`);
  const requestLog = createRequestLog(database.db, { retainDays: started.server.request_log_days, now: Date.now });
  const startedAt = Date.now();
  // Every generation's registry in turn: the metrics outlive reloads, the routes do not.
  let serving: Serving | null = null;
  const metrics = createGatewayMetrics({
    registry: () => serving!.generation.deps.registry,
    version: VERSION,
    startedAt,
    now: Date.now,
    beforeRender: () => finished.flush(),
  });
  const stopResponsePruning = startResponsePruning(database.db, { retainDays: started.server.response_store_days, now: Date.now });
  const finished = createRequestSink({
    observe: started.metrics.enabled ? (record) => metrics.observe(record) : null,
    logLines: logger.requests,
    insert: requestLog.insert,
  });
  const stops: Array<() => void | Promise<void>> = [];
  let exitCode = 0;
  const graceMs = (): number => serving?.generation.config.server.shutdown_grace_ms ?? started.server.shutdown_grace_ms;
  // Replicas share limits, replay records and key changes through Redis; one process keeps them in memory.
  const cluster = started.cluster.redis_url ? await (await import("./cluster")).startCluster(started, { db: database.db, log }) : null;
  if (cluster) stops.push(cluster.close);
  // SpendAuth shares the gateway's rate limiter (limits.spend_auth per commitment).
  const limiter = cluster?.limiter ?? createMemoryLimiter({ now: Date.now });
  // Loaded only when configured: viem alone costs ~20 MB of memory and ~30 ms of start-up.
  const spendAuth =
    spendAuthMode(started) === "off"
      ? null
      : await (await import("./spendauth/setup")).setupSpendAuth({ config: started, db: database.db, now: Date.now, limiter, redis: cluster?.link, log });
  if (spendAuth) {
    stops.push(async () => {
      // A served authorization never written is a payment never claimed: like a lost debit.
      if ((await spendAuth.stop()) > 0) exitCode = 1;
    });
  }
  const identities = createIdentityState({ db: database.db, config: () => serving?.generation.config ?? started, now: Date.now, limiter });
  stops.push(async () => {
    // A debit the database still refuses after the grace is lost: say so, and exit non-zero.
    const unwritten = await identities.close(graceMs());
    if (unwritten.length === 0) return;
    exitCode = 1;
    const micro = unwritten.reduce((sum, d) => sum + d.micro, 0);
    log("error", `credits: ${unwritten.length} queued debit(s), ${formatCredits(micro)} credits in all, could not be written before the stop and are lost`, {
      users: [...new Set(unwritten.map((d) => d.userId))],
    });
  });
  let webhooks: WebhooksService | null = null;
  let loadedAt = Date.now();
  let reloads = 0;
  const lasting: Lasting = {
    db: database.db,
    now: Date.now,
    version: VERSION,
    startedAt,
    identities,
    spendAuth: spendAuth?.hook,
    metrics,
    requestDone: finished.push,
    routeMemory: createRouteMemory(database.db, { now: Date.now, log }),
    reveals: createKeyReveals(Date.now),
    statusSections: [
      spendAuth ? spendAuth.statusSection : () => ({ spend_auth: { mode: "off" } }),
      () => ({ config_loaded_at: new Date(loadedAt).toISOString(), config_reloads: reloads }),
      cluster ? cluster.statusSection : () => ({}),
      await storageStatusSection(database),
      // Webhooks start once the server listens; until then they add nothing to /api/status.
      async () => (await webhooks?.status()) ?? {},
    ],
  };
  stops.push(lasting.routeMemory.close);
  const { hostname, port } = parseAddress(started.server.listen);
  // Listening comes first: a port of 0 is chosen by the system, and the links and Origin checks
  // of the first generation follow it. Until that generation is served every request is a bare 503:
  // on SQLite it is composed within the same turn; on Postgres the setup link's write comes first,
  // so a client that finds the gateway up finds the link logged. Elysia would ask for SO_REUSEPORT and development mode: a
  // second server on the same port would then share its connections (and split the rate limits
  // and reservations), and an error escaping a handler would be answered with a stack trace.
  // Bun's own body cap answers 413 without a body; the app refuses a declared length over
  // max_body_bytes before reading, and counts a chunked chat body as it arrives (src/app.ts,
  // src/body.ts), so Bun's is out of reach.
  const server = listenNaming("server.listen", started.server.listen, () =>
    Bun.serve({
      hostname,
      port,
      reusePort: false,
      development: false,
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      idleTimeout: 255,
      fetch: () => new Response(null, { status: 503 }),
    }),
  );
  const bound: Bound = { hostname, port: server.port ?? port };
  const first = servedConfig(loaded, bound, null).config;
  const setupLink = await issueSetupLink(database.db, { now: Date.now(), publicUrl: first.server.public_url });
  if (setupLink) log("warn", `no administrator yet: open ${setupLink} to create one (works once, within 24 hours)`);
  serving = serveGeneration(server, composeGeneration(first, lasting, null), lasting);
  stops.push(() => serving!.stop());
  if (started.webhooks.enabled) {
    const { startWebhooks } = await import("./webhooks");
    const { createModelCaller } = await import("./router/in-process");
    // Triage calls the models of whichever config serves when the call runs (a reload swaps it).
    const callModel = createModelCaller(() => serving!.generation.deps);
    webhooks = startWebhooks(first, { serviceId, log, secretValues: loaded.secretValues, secretEnv: loaded.secretEnv, callModel, db: database.db });
    stops.push(webhooks.stop);
    metrics.registerGauge(webhooks.outboxGauge);
  }
  log("info", `modelgate ${VERSION} (commit ${COMMIT}) listening on ${listenUrl(hostname, bound.port)}`, {
    config: loaded.source ?? "(embedded defaults)",
    data_dir: started.server.data_dir,
    database: database.where,
    configured_models: serving.generation.deps.registry.list().length,
  });

  /** Reads the config file again and serves it; what is logged is also the outcome `modelgate reload` prints. */
  const reload = (): { ok: boolean; message: string } => {
    const refused = (reason: string): { ok: boolean; message: string } => {
      const message = `reload refused, the config loaded at ${new Date(loadedAt).toISOString()} serves on: ${reason}`;
      log("error", message, { config: loaded.source });
      return { ok: false, message };
    };
    if (loaded.source === null) return refused("there is no config file to read again (the server runs on the embedded defaults)");
    let next: LoadedConfig;
    try {
      next = loadConfig(loaded.source);
    } catch (error) {
      return refused(error instanceof ConfigError ? `config error: ${error.message}` : String((error as Error)?.message ?? error));
    }
    const previous = serving!;
    const { config, waiting } = servedConfig(next, bound, previous.generation.config);
    let generation: Generation;
    try {
      generation = composeGeneration(config, lasting, previous.generation);
    } catch (error) {
      return refused(String((error as Error)?.message ?? error));
    }
    serving = serveGeneration(server, generation, lasting);
    previous.stop();
    webhooks?.reload(config, { secretValues: next.secretValues, secretEnv: next.secretEnv });
    loadedAt = Date.now();
    reloads += 1;
    const wait = waiting.length > 0 ? `restart to apply ${waiting.join(", ")} (changed in the file); until then the running values are kept` : null;
    if (wait) log("warn", `reload: ${wait}`);
    const message = `config read again from ${loaded.source}; new requests are served by it, those under way finish on the one before`;
    log("info", `reload: ${message}`, { reloads, configured_models: generation.deps.registry.list().length, upstreams: config.upstreams.length });
    return { ok: true, message: wait ? `${message}\n${wait}` : message };
  };
  let attempts = 0;

  let removePidFile: (() => void) | null = null;
  let stopping = false;
  const shutdown = async (signal: string): Promise<void> => {
    if (stopping) return;
    stopping = true;
    log("info", `${signal}: draining (up to ${graceMs()} ms)`);
    await stopWithin(server, graceMs());
    // Everything written behind (debits, settlements, the request log) retries side by side, each
    // for up to the grace, so a stop under a lock takes one grace, not one per part.
    const [, unlogged] = await Promise.all([Promise.all(stops.map((stop) => stop())), finished.closeWithin(graceMs())]);
    if (unlogged.length > 0) {
      exitCode = 1;
      log("error", `request log: ${unlogged.length} row(s) could not be written before the stop and are lost`);
    }
    requestLog.close();
    stopResponsePruning();
    await database.close();
    removePidFile?.();
    log("info", "stopped");
    process.exit(exitCode);
  };
  process.on("SIGTERM", () => void shutdown("SIGTERM"));
  process.on("SIGINT", () => void shutdown("SIGINT"));
  // Also what a closing terminal sends; the default would exit at once, losing what is queued.
  process.on("SIGHUP", () => {
    if (stopping) return;
    attempts += 1;
    writeReloadOutcome(started.server.data_dir, { pid: process.pid, attempt: attempts, ...reload() });
  });
  // Last: `modelgate reload` signals only a server that has its SIGHUP handler (the default would end it).
  removePidFile = writePidFile(started.server.data_dir);
  process.on("exit", removePidFile);
}

/**
 * On Postgres, data_dir holds only the pid file and the last reload's outcome (`modelgate reload`
 * reads both); SQLite's open makes it otherwise. Made private as SQLite's is, before listening, so
 * a directory that cannot be made stops the start instead of the running server.
 */
function makeDataDir(dataDir: string): void {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new Error(`server.data_dir: cannot create ${dataDir} (${(err as Error)?.message ?? err})`);
  }
}
