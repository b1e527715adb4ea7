/**
 * Sends the due triage deliveries (./store.ts), each on its own: a success marks that target's
 * row sent; a failure makes it pending again after a backoff (webhooks.backoff_ms doubling up to
 * backoff_max_ms), or dead with its redacted reason after `delivery_attempts`, or at once when
 * the target refused the request (a 4xx). One target's outage neither repeats another's message
 * nor asks the model again. Due rows are claimed (./delivery-rows.ts claimDeliveries) for the longest
 * timeout_ms plus LEASE_MARGIN_MS, so processes sharing the database never send one at the same
 * time. A delivery is sent at least once: were this process to die between a service's answer and
 * the row's update, that one message would go again once the claim runs out (Matrix folds it by
 * its transaction id).
 */
import type { NotifierConfig } from "../../config/webhooks-schema";
import type { Redact } from "../redact";
import type { Outbox } from "../outbox";
import { backoffDelay } from "../../backoff";
import { messageOf } from "./message";
import { sendMessage } from "./notify";
import { alertById } from "./store";
import { claimDeliveries, deliveriesOf, markFailed, markSent, nextDue, releaseDelivery, type DeliveryRow } from "./delivery-rows";
import type { TriageJob } from "./handler";

export interface DeliveryOptions {
  outbox: Outbox;
  jobs: readonly TriageJob[];
  backoffMs: number;
  backoffMaxMs: number;
  redact: Redact;
  log: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
  /** How often due rows are looked for when nothing wakes the sender (a retry made elsewhere: the dashboard's). */
  pollMs?: number;
}

export interface DeliverySender {
  /** New deliveries were stored: look now. */
  wake(): void;
  /** The jobs (and their notify targets) deliveries are sent by from now on: a reloaded config's. */
  setJobs(jobs: readonly TriageJob[]): void;
  stop(graceMs: number): Promise<void>;
}

const BATCH = 32;
const POLL_MS = 1_000;
/** How long past a send's timeout_ms its claim holds: time to record the outcome. */
const LEASE_MARGIN_MS = 10_000;

export function startDeliveries(options: DeliveryOptions): DeliverySender {
  const { outbox } = options;
  const { db } = outbox;
  let jobs = new Map(options.jobs.map((job) => [job.job_id, job]));
  const sending = new Set<Promise<void>>();
  const stopped = new AbortController();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let closed = false;

  async function deliver(row: DeliveryRow): Promise<void> {
    const alert = await alertById(db, row.alert_id);
    const job = alert ? jobs.get(alert.job_id) : undefined;
    const target: NotifierConfig | undefined = job?.notify[row.target];
    if (!alert || !target || target.kind !== row.kind) {
      await markFailed(db, row, `notify target ${row.target} (${row.kind}) is no longer in the config of job ${alert?.job_id ?? "?"}`, null);
      return;
    }
    const message = await messageOf(db, alert);
    const replyTo = message.refersTo === null ? null : ((await deliveriesOf(db, [message.refersTo])).find((d) => d.target === row.target)?.remote_id ?? null);
    const result = await sendMessage(target, message, {
      deliveryId: `modelgate-${row.alert_id}-${row.target}`,
      replyTo,
      timeoutMs: job!.timeout_ms,
      signal: stopped.signal,
    });
    if (stopped.signal.aborted && !result.ok) {
      // The stop cut it short: due again at once, sent after the restart (or by another replica).
      await releaseDelivery(db, row, outbox.now());
      return;
    }
    if (result.ok) {
      await markSent(db, row, outbox.now(), result.remoteId);
      return;
    }
    const error = options.redact(result.error);
    const attempts = row.attempts + 1;
    const dead = result.permanent || attempts >= job!.triage.delivery_attempts;
    const retryAt = dead ? null : outbox.now() + backoffDelay(attempts, { firstMs: options.backoffMs, maxMs: options.backoffMaxMs });
    await markFailed(db, row, error, retryAt);
    if (dead)
      options.log("error", `triage: delivery of alert ${row.alert_id} to notify[${row.target}] (${row.kind}) is dead after ${attempts} attempt(s)`, { error });
    else options.log("warn", `triage: delivery of alert ${row.alert_id} to notify[${row.target}] (${row.kind}) failed; retrying`, { error, attempt: attempts });
  }

  /** The longest a send may take, plus the margin: how long a claim holds its rows. */
  function leaseMs(): number {
    return Math.max(0, ...[...jobs.values()].map((job) => job.timeout_ms)) + LEASE_MARGIN_MS;
  }

  async function look(): Promise<void> {
    if (closed) return;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    let due: DeliveryRow[] = [];
    try {
      due = await claimDeliveries(db, outbox.now(), BATCH, leaseMs());
    } catch (error) {
      options.log("warn", "triage: due deliveries unreadable", { error: String((error as Error)?.message ?? error) });
    }
    for (const row of due) {
      const done: Promise<void> = deliver(row)
        .catch((error) => options.log("error", "triage: cannot record a delivery's outcome", { error: String((error as Error)?.message ?? error) }))
        .finally(() => {
          sending.delete(done);
          void look();
        });
      sending.add(done);
    }
    await schedule();
  }

  async function schedule(): Promise<void> {
    if (closed || timer !== null) return;
    let wait = options.pollMs ?? POLL_MS;
    try {
      const at = await nextDue(db);
      // Rows claimed now are being sent (each one's end looks again); a lease running out is looked at then.
      if (at !== null) wait = Math.min(wait, Math.max(0, at - outbox.now()));
    } catch {
      // unreadable now: the poll looks again
    }
    if (closed || timer !== null) return;
    timer = setTimeout(() => void look(), Math.max(10, wait));
  }

  void look();
  return {
    wake: () => queueMicrotask(() => void look()),
    setJobs(next) {
      jobs = new Map(next.map((job) => [job.job_id, job]));
    },
    async stop(graceMs) {
      closed = true;
      if (timer !== null) clearTimeout(timer);
      await Promise.race([Promise.all(sending), Bun.sleep(graceMs)]);
      stopped.abort();
      await Promise.all(sending);
    },
  };
}
