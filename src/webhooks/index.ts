/**
 * The webhook feature as serve.ts starts it when `[webhooks] enabled = true`: the outbox (on its
 * own connection to modelgate.db, or on the Postgres database every replica shares), the
 * WebhookGateway on bind_address, the `[[jobs]]` runners, and an hourly prune of done calls older
 * than retain_done_hours. On Postgres every replica runs all of it: claims and the sweep's and
 * the prune's single statements are safe side by side (./store-pg.ts). A reload swaps the
 * endpoints and the handlers; the outbox and the listener stay as started. Also the library entry
 * point: TypeScript users import WebhookGateway / WebhookProducer / Outbox from here.
 */
import { join } from "node:path";
import { secretRedactor, type Redact } from "./redact";
import type { Config } from "../config/schema";
import type { Db } from "../db/client";
import { WebhookGateway } from "./gateway";
import { listenNaming, listenUrl, parseAddress } from "../listen";
import { startJobRunner, type JobRunner, type JobRunnerOptions } from "./jobs";
import type { JobHandlerConfig } from "../config/webhooks-schema";
import { Outbox } from "./outbox";
import { DEFAULT_TOLERANCE_S, standardWebhooksWindowMs } from "./standard-webhooks";
import type { OutboxStats } from "./admin";
import type { GaugeSource } from "../metrics/gateway";
import { startTriage, triageJobs, type ModelCaller, type TriageService } from "./triage";

export { WebhookGateway } from "./gateway";
export { WebhookProducer, type JobCall, type ProducerOptions } from "./producer";
export { Outbox } from "./outbox";

/** How often calls whose last lease ran out are marked dead: every lease_ms, within these bounds. */
const SWEEP_MIN_MS = 1_000;
const SWEEP_MAX_MS = 10_000;

/** Status must render even when the database is failing (that is when it matters most). */
async function safeStats(outbox: Outbox): Promise<OutboxStats | { error: string }> {
  try {
    return await outbox.stats();
  } catch (error) {
    return { error: `outbox unreadable: ${(error as Error)?.message ?? error}` };
  }
}

type Log = (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;

export interface WebhooksService {
  gateway: WebhookGateway;
  outbox: Outbox;
  port: number;
  /** A section for /api/status. */
  status(): Promise<Record<string, unknown>>;
  /** Calls per undone state, for /metrics. */
  outboxGauge: GaugeSource;
  /**
   * Serves the endpoints and runs the `[[jobs]]` handlers of `config` from now on (a reload).
   * bind_address and the outbox's settings stay those of the start.
   */
  reload(config: Config, secrets: Pick<WebhooksOptions, "secretValues" | "secretEnv">): void;
  stop(): Promise<void>;
}

/** `at`: the SQLite file (the outbox opens its own connection to it), or the server's database handle. */
export function outboxFor(config: Config, at: string | Db, options: { now?: () => number; random?: () => number; redact?: Redact } = {}): Outbox {
  const w = config.webhooks;
  return new Outbox(at, {
    now: options.now,
    random: options.random,
    redact: options.redact,
    dedupeWindowMs: dedupeWindowMs(w),
    leaseMs: w.lease_ms,
    maxAttempts: w.max_attempts,
    backoffMs: w.backoff_ms,
    backoffMaxMs: w.backoff_max_ms,
    maxPendingBytes: w.max_pending_bytes,
  });
}

type WindowKeys = "dedupe_window_s" | "endpoints";

/**
 * How long a delivery id folds redeliveries: dedupe_window_s, and never less than a Standard
 * Webhooks endpoint's replays can arrive (twice its tolerance_s), however small the window is set.
 */
export function dedupeWindowMs(w: Pick<Config["webhooks"], WindowKeys>): number {
  const replays = w.endpoints.filter((e) => e.auth === "standard-webhooks").map((e) => standardWebhooksWindowMs(e.tolerance_s ?? DEFAULT_TOLERANCE_S));
  return Math.max(w.dedupe_window_s * 1000, ...replays);
}

/**
 * How long a done call is kept: retain_done_hours, and at least the dedupe window, since a done call
 * also holds its dedupe key (a redelivery inside the window must still find it).
 */
export function doneRetentionMs(w: Pick<Config["webhooks"], "retain_done_hours" | WindowKeys>): number {
  return Math.max(w.retain_done_hours * 3_600_000, dedupeWindowMs(w));
}

export interface WebhooksOptions {
  serviceId: number;
  log: Log;
  /** From the loaded config: kept out of job failures' reasons, and out of commands' environment. */
  secretValues?: ReadonlySet<string>;
  secretEnv?: ReadonlySet<string>;
  /** The server's own model router, for `triage` jobs (src/router/in-process.ts). */
  callModel?: ModelCaller;
  /** The server's database: on Postgres the outbox uses it; on SQLite it opens its own connection to the file. */
  db?: Db;
}

/** Jobs that endpoints feed but nothing in the server consumes: no [[jobs]] handler and no pull API. */
export function unconsumedJobs(config: Pick<Config, "webhooks" | "jobs">): Array<{ id: number; paths: string[] }> {
  if (config.webhooks.pull_token !== undefined) return [];
  const handled = new Set(config.jobs.map((j) => j.job_id));
  const orphans = new Map<number, string[]>();
  for (const e of config.webhooks.endpoints) if (!handled.has(e.job_id)) orphans.set(e.job_id, [...(orphans.get(e.job_id) ?? []), e.path]);
  return [...orphans].map(([id, paths]) => ({ id, paths }));
}

export function startWebhooks(config: Config, options: WebhooksOptions): WebhooksService {
  const { log, serviceId } = options;
  const w = config.webhooks;
  const redact = secretRedactor(options.secretValues ?? new Set());
  const outbox = outboxFor(config, options.db ?? join(config.server.data_dir, "modelgate.db"), { redact });
  const gateway = new WebhookGateway({ config: w, outbox, serviceId, log });
  const address = parseAddress(w.bind_address);
  const port = listenNaming("webhooks.bind_address", w.bind_address, () => gateway.start(address));
  const startTriageFor = (served: Config): TriageService | null =>
    options.callModel ? startTriage(served, { outbox, callModel: options.callModel, redact, log }) : null;
  let triage = startTriageFor(config);
  const handlers = startHandlers(outbox);
  handlers.set(config.jobs, { leaseMs: w.lease_ms, log, secretValues: options.secretValues, secretEnv: options.secretEnv, triage: triage?.deps });
  let current = config;
  const retainMs = doneRetentionMs(w);
  const prune = (): void => {
    outbox.prune(retainMs).then(
      (n) => n > 0 && log("info", `pruned ${n} done webhook call(s)`),
      (error) => log("warn", "webhook prune failed", { error: String(error?.message ?? error) }),
    );
  };
  prune();
  void safeStats(outbox); // the gauge's first reading
  const pruneTimer = setInterval(prune, 3_600_000);
  pruneTimer.unref?.();
  // A call whose last lease ran out is dead, whether or not a consumer comes to claim again. The
  // sweep also reads the stats the /metrics gauge shows.
  const sweepTimer = setInterval(
    () => {
      outbox.killExpiredLeases().then(
        (n) => n > 0 && log("error", `webhooks: ${n} call(s) dead: the lease of their last attempt ran out (modelgate jobs retry CALL_ID delivers one again)`),
        (error) => log("warn", "webhooks: sweep of expired leases failed", { error: String(error?.message ?? error) }),
      );
      void safeStats(outbox);
    },
    Math.min(SWEEP_MAX_MS, Math.max(SWEEP_MIN_MS, w.lease_ms)),
  );
  sweepTimer.unref?.();
  if (serviceId === 0) {
    // Only a Blueprint deployment correlates job calls with a service instance: not a warning.
    log(
      "info",
      "webhooks: service_id is 0 (a Blueprint deployment sets --service-id or $MODELGATE_SERVICE_ID to correlate job calls with its service instance)",
    );
  }
  const describe = (served: Config): Record<string, unknown> => {
    for (const job of unconsumedJobs(served)) {
      log(
        "warn",
        `webhooks: job ${job.id} (${job.paths.join(", ")}) has no [[jobs]] handler and the pull API is off (no webhooks.pull_token): its calls wait in the outbox until a WebhookProducer of yours takes them`,
      );
    }
    return {
      endpoints: served.webhooks.endpoints.map((e) => `${e.path} -> job ${e.job_id} (${e.auth})`),
      jobs: served.jobs.map((j) => j.job_id),
      pull_api: served.webhooks.pull_token !== undefined,
      service_id: serviceId,
    };
  };
  log("info", `webhook gateway listening on ${listenUrl(address.hostname, port)}`, describe(config));
  return {
    gateway,
    outbox,
    port,
    status: async () => ({
      webhooks: {
        bind_address: w.bind_address,
        ...(await safeStats(outbox)),
        accepted_since_start: outbox.counters.accepted,
        duplicates_since_start: outbox.counters.duplicates,
        commits_since_start: outbox.counters.commits,
        failed_commits_since_start: outbox.counters.failedCommits,
      },
    }),
    outboxGauge: {
      name: "modelgate_webhook_outbox_calls",
      help: "Webhook calls in the outbox that are not done, by state",
      collect: () => {
        const stats = outbox.recentStats();
        void safeStats(outbox); // read again for the next scrape
        if (stats === null) return [];
        return (["pending", "leased", "dead"] as const).map((state) => ({ labels: { state }, value: stats[state] }));
      },
    },
    reload(next, secrets) {
      current = next;
      gateway.reconfigure(next.webhooks);
      if (triage) triage.setJobs(triageJobs(next));
      else triage = startTriageFor(next);
      handlers.set(next.jobs, { leaseMs: w.lease_ms, log, ...secrets, triage: triage?.deps });
      log("info", "webhooks: reloaded", describe(next));
    },
    async stop() {
      clearInterval(pruneTimer);
      clearInterval(sweepTimer);
      const graceMs = current.server.shutdown_grace_ms;
      // Side by side: a stop takes one grace, not one for the requests and another for the jobs.
      await Promise.all([gateway.stop(graceMs), handlers.stop(graceMs), triage?.stop(graceMs)]);
      await outbox.close();
    },
  };
}

/**
 * The `[[jobs]]` handlers, a runner each. set() keeps a handler written the same as before (its
 * workers and running calls untouched), drains one that changed or went (calls already running end
 * under the table they began with, and it takes no more), and starts the new ones. A table is
 * compared whole, whatever kind of handler it describes.
 */
function startHandlers(outbox: Outbox): { set(handlers: readonly JobHandlerConfig[], options: JobRunnerOptions): void; stop(graceMs: number): Promise<void> } {
  let running: Array<{ handler: JobHandlerConfig; runner: JobRunner }> = [];
  const draining = new Set<JobRunner>();
  return {
    set(handlers, options) {
      const next = handlers.map(
        (handler) => running.find((r) => Bun.deepEquals(r.handler, handler)) ?? { handler, runner: startJobRunner(outbox, [handler], options) },
      );
      for (const { runner } of running) {
        if (next.some((r) => r.runner === runner)) continue;
        draining.add(runner);
        void runner.drain().then(() => draining.delete(runner));
      }
      running = next;
    },
    async stop(graceMs) {
      await Promise.all([...running.map((r) => r.runner), ...draining].map((runner) => runner.stop(graceMs)));
    },
  };
}
