/**
 * Sends the due triage deliveries (./store.ts), each on its own: a success marks that target's
 * row sent; a failure makes it pending again after a backoff (webhooks.backoff_ms doubling up to
 * backoff_max_ms), or dead with its redacted reason after `delivery_attempts`, or at once when
 * the target refused the request (a 4xx). One target's outage neither repeats another's message
 * nor asks the model again. A delivery is sent at least once: were this process to die between a
 * service's answer and the row's update, that one message would go again after the restart
 * (Matrix folds it by its transaction id).
 */
import type { NotifierConfig } from "../../config/webhooks-schema";
import type { Redact } from "../redact";
import type { Outbox } from "../outbox";
import { backoffDelay } from "../../backoff";
import { messageOf } from "./message";
import { sendMessage } from "./notify";
import { alertById, deliveriesOf, dueDeliveries, markFailed, markSent, nextDue, type DeliveryRow } from "./store";
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

export function startDeliveries(options: DeliveryOptions): DeliverySender {
  const { outbox } = options;
  let jobs = new Map(options.jobs.map((job) => [job.job_id, job]));
  const inFlight = new Set<string>();
  const sending = new Set<Promise<void>>();
  const stopped = new AbortController();
  let timer: ReturnType<typeof setTimeout> | null = null;
  let closed = false;

  async function deliver(row: DeliveryRow): Promise<void> {
    const alert = alertById(outbox.sqlite, row.alert_id);
    const job = alert ? jobs.get(alert.job_id) : undefined;
    const target: NotifierConfig | undefined = job?.notify[row.target];
    if (!alert || !target || target.kind !== row.kind) {
      await outbox.transact(() =>
        markFailed(outbox.sqlite, row, `notify target ${row.target} (${row.kind}) is no longer in the config of job ${alert?.job_id ?? "?"}`, null),
      );
      return;
    }
    const message = messageOf(outbox.sqlite, alert);
    const replyTo = message.refersTo === null ? null : (deliveriesOf(outbox.sqlite, message.refersTo).find((d) => d.target === row.target)?.remote_id ?? null);
    const result = await sendMessage(target, message, {
      deliveryId: `modelgate-${row.alert_id}-${row.target}`,
      replyTo,
      timeoutMs: job!.timeout_ms,
      signal: stopped.signal,
    });
    if (stopped.signal.aborted && !result.ok) return; // the stop cut it short: pending as it was, sent after the restart
    if (result.ok) {
      await outbox.transact(() => markSent(outbox.sqlite, row, outbox.now(), result.remoteId));
      return;
    }
    const error = options.redact(result.error);
    const attempts = row.attempts + 1;
    const dead = result.permanent || attempts >= job!.triage.delivery_attempts;
    const retryAt = dead ? null : outbox.now() + backoffDelay(attempts, { firstMs: options.backoffMs, maxMs: options.backoffMaxMs });
    await outbox.transact(() => markFailed(outbox.sqlite, row, error, retryAt));
    if (dead)
      options.log("error", `triage: delivery of alert ${row.alert_id} to notify[${row.target}] (${row.kind}) is dead after ${attempts} attempt(s)`, { error });
    else options.log("warn", `triage: delivery of alert ${row.alert_id} to notify[${row.target}] (${row.kind}) failed; retrying`, { error, attempt: attempts });
  }

  function look(): void {
    if (closed) return;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    let due: DeliveryRow[] = [];
    try {
      due = dueDeliveries(outbox.sqlite, outbox.now(), BATCH + inFlight.size).filter((row) => !inFlight.has(`${row.alert_id}/${row.target}`));
    } catch (error) {
      options.log("warn", "triage: due deliveries unreadable", { error: String((error as Error)?.message ?? error) });
    }
    for (const row of due) {
      const key = `${row.alert_id}/${row.target}`;
      inFlight.add(key);
      const done: Promise<void> = deliver(row)
        .catch((error) => options.log("error", "triage: cannot record a delivery's outcome", { error: String((error as Error)?.message ?? error) }))
        .finally(() => {
          inFlight.delete(key);
          sending.delete(done);
          look();
        });
      sending.add(done);
    }
    schedule();
  }

  function schedule(): void {
    if (closed || timer !== null) return;
    let wait = options.pollMs ?? POLL_MS;
    try {
      const at = nextDue(outbox.sqlite);
      const now = outbox.now();
      // Rows due now are being sent (each one's end looks again) or wait for the next look.
      if (at !== null) wait = Math.min(wait, at > now ? at - now : inFlight.size > 0 ? wait : 0);
    } catch {
      // unreadable now: the poll looks again
    }
    timer = setTimeout(look, Math.max(10, wait));
  }

  look();
  return {
    wake: () => queueMicrotask(look),
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
