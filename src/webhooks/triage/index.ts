/**
 * Alert triage as the webhooks service starts it: the `[[jobs]]` with `triage`, the sender of their
 * deliveries, and what the job runner hands each triage call. Built by one function from the
 * config, so a reload can build it again.
 */
import type { Config } from "../../config/schema";
import type { Outbox } from "../outbox";
import type { Redact } from "../redact";
import type { TriageDeps, TriageJob } from "./handler";
import type { ModelCaller } from "./model";
import { startDeliveries, type DeliveryOptions } from "./deliveries";

export type { ModelCaller } from "./model";

export interface TriageService {
  deps: TriageDeps;
  /** The triage jobs of a reloaded config: deliveries go to their notify targets from now on. */
  setJobs(jobs: readonly TriageJob[]): void;
  stop(graceMs: number): Promise<void>;
}

export interface TriageOptions {
  outbox: Outbox;
  callModel: ModelCaller;
  redact: Redact;
  log: DeliveryOptions["log"];
}

export function triageJobs(config: Pick<Config, "jobs">): TriageJob[] {
  return config.jobs.filter((job): job is TriageJob => job.triage !== undefined && job.notify !== undefined);
}

/** Null when no job triages. */
export function startTriage(config: Pick<Config, "jobs" | "webhooks">, options: TriageOptions): TriageService | null {
  const jobs = triageJobs(config);
  if (jobs.length === 0) return null;
  const sender = startDeliveries({
    outbox: options.outbox,
    jobs,
    backoffMs: config.webhooks.backoff_ms,
    backoffMaxMs: config.webhooks.backoff_max_ms,
    redact: options.redact,
    log: options.log,
  });
  return {
    deps: { outbox: options.outbox, callModel: options.callModel, delivered: sender.wake },
    setJobs: (next) => sender.setJobs(next),
    stop: (graceMs) => sender.stop(graceMs),
  };
}
