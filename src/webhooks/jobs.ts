/**
 * The `[[jobs]]` handlers from config, keyed by job_id, each consuming its calls through a
 * WebhookProducer with `concurrency` workers; how each kind of handler (command, forward, triage)
 * runs one call is ./job-handlers.ts. A stop kills the commands still running after its grace and
 * gives up the forwards still waiting; their calls are handed back with their attempt.
 * A failed attempt's reason has the config's secret values redacted before it is logged or stored
 * as `last_error`. Failed attempts are retried by the outbox with backoff until max_attempts, then
 * dead. While a handler runs, its lease is extended every third of the lease, so a long job is
 * never handed to a second worker; if this process dies, the lease runs out and the call is
 * delivered again.
 */
import { secretRedactor } from "./redact";
import type { JobHandlerConfig } from "../config/webhooks-schema";
import type { Outbox } from "./outbox";
import { WebhookProducer } from "./producer";
import type { TriageDeps } from "./triage/handler";
import { killGroup, runHandler, type HandlerContext, type Outcome } from "./job-handlers";

export interface JobRunnerOptions {
  leaseMs: number;
  pollMs?: number;
  log?: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
  /** The config's secret values, never shown in a failure's reason. */
  secretValues?: ReadonlySet<string>;
  /** Environment variables a command does not inherit (those the config reads secrets from). */
  secretEnv?: ReadonlySet<string>;
  /** What `triage` jobs need (the model caller); without it a triage job's calls fail. */
  triage?: TriageDeps;
}

export interface JobRunner {
  /** Stops taking calls and waits up to `graceMs` for running ones. */
  stop(graceMs: number): Promise<void>;
  /** Stops taking calls; resolves when the running ones have ended, however long they take (a reload retiring a handler). */
  drain(): Promise<void>;
}

/** How long a stop waits for the calls of the commands it killed to be handed back. */
const RELEASE_WAIT_MS = 1_000;

export function startJobRunner(outbox: Outbox, handlers: readonly JobHandlerConfig[], options: JobRunnerOptions): JobRunner {
  const producers: WebhookProducer[] = [];
  const workers: Promise<void>[] = [];
  const running = new Set<number>();
  const secrets = options.secretValues ?? new Set<string>();
  const env: Record<string, string | undefined> = { ...process.env };
  for (const name of options.secretEnv ?? []) delete env[name];
  // The metadata variables come from the call alone: X_WEBHOOK_NAME is absent for an unnamed endpoint, not inherited.
  for (const name of Object.keys(env)) if (name.startsWith("X_WEBHOOK_") || name.startsWith("X_GATEWAY_")) delete env[name];
  const context: HandlerContext = {
    running,
    env,
    redact: secretRedactor(secrets),
    longestSecret: Math.max(0, ...[...secrets].map((s) => s.length)),
    stopping: false,
    stopped: new AbortController(),
    triage: options.triage,
  };
  for (const handler of handlers) {
    for (let slot = 0; slot < handler.concurrency; slot++) {
      const producer = new WebhookProducer(outbox, { jobIds: [handler.job_id], leaseMs: options.leaseMs, pollMs: options.pollMs });
      producers.push(producer);
      workers.push(work(producer, handler, options, context));
    }
  }
  return {
    async drain() {
      for (const producer of producers) producer.close();
      await Promise.all(workers);
    },
    async stop(graceMs) {
      for (const producer of producers) producer.close();
      await Promise.race([Promise.all(workers), Bun.sleep(graceMs)]);
      // Commands still running past the grace are killed (one left running would overlap its own
      // redelivery, and outlive timeout_ms), and forwards still waiting are given up; their calls
      // are handed back with their attempt, since the stop, not the handler, ended them, and are
      // delivered again after the restart.
      context.stopping = true;
      context.stopped.abort();
      for (const group of running) killGroup(group);
      await Promise.race([Promise.all(workers), Bun.sleep(RELEASE_WAIT_MS)]);
    },
  };
}

async function work(producer: WebhookProducer, handler: JobHandlerConfig, options: JobRunnerOptions, context: HandlerContext): Promise<void> {
  for await (const call of producer) {
    const heartbeat = setInterval(() => void call.extend().catch(() => {}), Math.max(50, Math.floor(options.leaseMs / 3)));
    let outcome: Outcome;
    try {
      outcome = await runHandler(handler, call, context);
    } catch (error) {
      outcome = { ok: false, error: String((error as Error)?.message ?? error) };
    } finally {
      clearInterval(heartbeat);
    }
    try {
      if (outcome.ok) {
        if (outcome.acked === undefined) await call.ack();
      } else if (context.stopping) await call.release();
      else {
        const error = context.redact(outcome.error);
        const state = await call.fail(error);
        options.log?.(
          state === "dead" ? "error" : "warn",
          `job ${call.jobId} call ${call.callId} attempt ${call.attempt} failed${state === "dead" ? "; now dead" : ""}`,
          { error },
        );
      }
    } catch (error) {
      // The outbox is unwritable; the lease will expire and the call will be delivered again.
      options.log?.("error", "cannot record job outcome", { call_id: call.callId, error: String((error as Error)?.message ?? error) });
    }
  }
}
