/**
 * The `triage` job handler: one webhook call in, a stored alert and one durable delivery per
 * notify target out. Per call, in order, each step durable before the next:
 *   1. the body is read (./parse.ts) and an alert row written: a repeat of its group's last
 *      notification (same status and fingerprints) is `duplicate` and goes no further; past
 *      `storm_per_minute` on its endpoint it is `held` in that endpoint's open digest, whose
 *      deliveries are due when the digest closes; otherwise it is `triaging`;
 *   2. the model is asked (retrying what may pass, up to `wait_ms`);
 *   3. its answer, or why there is none, is stored together with the deliveries.
 * The call is acked in the transaction of its last step (the alert row of a repeat or a held
 * alert, else the answer's), so the ack costs no commit of its own. A call delivered again (this
 * process died) finds its row: a stored answer is never asked for twice, and deliveries already
 * made are not made again. On Postgres, replicas taking calls of one job at once record their
 * alerts one at a time (a transaction-scoped advisory lock per job): a repeat, a storm's count
 * and its one open digest are decided as on one box.
 */
import type { Db } from "../../db/client";
import { postgresOf, transact } from "../../db/engine";
import type { JobHandlerConfig, TriageConfig } from "../../config/webhooks-schema";
import type { Outbox } from "../outbox";
import { METADATA, type JobCall } from "../producer";
import type { AlertGroup } from "./alert";
import { parseAlert } from "./parse";
import { renderPrompt } from "./prompt";
import { withoutThinking, type ModelCaller } from "./model";
import { alertByCall, countSince, insertAlert, lastOfGroup, openDigest, setSummary, type AlertRow } from "./store";
import { addDeliveries } from "./delivery-rows";
import { backoffDelay } from "../../backoff";

export interface TriageDeps {
  outbox: Outbox;
  callModel: ModelCaller;
  /** Told when deliveries were added, so they go out at once. */
  delivered: () => void;
}

export type TriageJob = JobHandlerConfig & { triage: TriageConfig; notify: NonNullable<JobHandlerConfig["notify"]> };

const STORM_WINDOW_MS = 60_000;
/** The first retry of a model that may answer later; doubling, within what is left of wait_ms. */
const MODEL_RETRY_MS = 250;
const MODEL_RETRY_MAX_MS = 5_000;

/** The endpoint path and name a call arrived on, from its metadata. */
function origin(call: JobCall): { path: string; name: string | null } {
  return { path: call.metadata[METADATA.path] ?? "", name: call.metadata[METADATA.name] ?? null };
}

/** Runs the call to its end and acks it (see the header); the runner does not ack it again. */
export async function runTriage(job: TriageJob, call: JobCall, deps: TriageDeps): Promise<void> {
  const { outbox } = deps;
  const ack = (tx: Db): Promise<boolean> => outbox.ackIn(tx, call.callId, call.attempt);
  const group = parseAlert(call);
  const { path, name } = origin(call);
  const found = await alertByCall(outbox.db, call.callId);
  const row =
    found ??
    (await transact(outbox.db, async (tx) => {
      const recorded = await recordAlert(tx, job, call, group, outbox.now());
      if (recorded.state !== "triaging") await ack(tx);
      return recorded;
    }));
  if (row.state !== "triaging") {
    if (found !== null) await transact(outbox.db, ack);
    return;
  }
  const prompt = renderPrompt(job.triage.prompt, { group, body: new TextDecoder().decode(call.body), endpoint: path, name });
  const answer = await askModel(job.triage, prompt, deps.callModel, outbox.now);
  await transact(outbox.db, async (tx) => {
    await setSummary(tx, row.id, answer);
    await addDeliveries(
      tx,
      row.id,
      job.notify.map((n) => n.kind),
      outbox.now(),
    );
    await ack(tx);
  });
  deps.delivered();
}

/** The advisory lock key of a job's alerts ("mgtriage" in ASCII, plus the job id). */
const TRIAGE_LOCK = 0x6d67747269616765n;

/** The call's alert row, deciding whether it is a repeat, part of a storm, or to be triaged. */
async function recordAlert(tx: Db, job: TriageJob, call: JobCall, group: AlertGroup, now: number): Promise<AlertRow> {
  const pg = postgresOf(tx);
  if (pg) {
    await pg`SELECT pg_advisory_xact_lock(${String(TRIAGE_LOCK + BigInt(job.job_id))}::bigint)`;
    // Another replica may have taken the call over (its lease ran out) and recorded it meanwhile.
    const recorded = await alertByCall(tx, call.callId);
    if (recorded) return recorded;
  }
  const { path } = origin(call);
  const last = group.groupKey === null ? null : await lastOfGroup(tx, job.job_id, group.groupKey);
  const base = alertFields(job, path, call.callId, group, now);
  if (last !== null && group.dedupeKey !== null && last.dedupe_key === group.dedupeKey) return insertAlert(tx, { ...base, state: "duplicate" });
  if (group.status === "resolved" && group.groupKey !== null) base.refers_to = (await lastOfGroup(tx, job.job_id, group.groupKey, "firing"))?.id ?? null;
  if ((await countSince(tx, job.job_id, path, now - STORM_WINDOW_MS, job.triage.storm_per_minute)) < job.triage.storm_per_minute)
    return insertAlert(tx, { ...base, state: "triaging" });
  let digest = await openDigest(tx, job.job_id, path, now);
  if (digest === null) {
    const dueAt = now + job.triage.digest_window_s * 1000;
    digest = await insertAlert(tx, {
      ...base,
      call_id: null,
      kind: "digest",
      status: "firing",
      group_key: null,
      dedupe_key: null,
      title: `Alert storm on ${path}`,
      details: "",
      alert_count: 0,
      state: "digest",
      refers_to: null,
      due_at: dueAt,
    });
    await addDeliveries(
      tx,
      digest.id,
      job.notify.map((n) => n.kind),
      dueAt,
    );
  }
  return insertAlert(tx, { ...base, state: "held", digest_id: digest.id });
}

function alertFields(
  job: TriageJob,
  path: string,
  callId: number,
  group: AlertGroup,
  now: number,
): Omit<AlertRow, "id" | "summary" | "summary_error" | "state"> {
  return {
    call_id: callId,
    job_id: job.job_id,
    path,
    kind: group.kind,
    status: group.status,
    group_key: group.groupKey,
    dedupe_key: group.dedupeKey,
    title: group.title,
    severity: group.severity,
    details: group.alerts.map((a) => `[${a.status}] ${a.name}${a.severity ? ` (${a.severity})` : ""}${a.summary ? `: ${a.summary}` : ""}`).join("\n"),
    alert_count: group.alerts.length,
    refers_to: null,
    digest_id: null,
    created_at: now,
    due_at: null,
  };
}

/** The model's summary, or why there is none once `wait_ms` has passed (a refusal: at once). */
async function askModel(triage: TriageConfig, prompt: string, callModel: ModelCaller, now: () => number): Promise<{ summary: string } | { error: string }> {
  const deadline = now() + triage.wait_ms;
  for (let attempt = 1; ; attempt++) {
    const left = deadline - now();
    const answer = await callModel({ model: triage.model, prompt, maxTokens: triage.max_tokens, asUser: triage.as_user ?? null, timeoutMs: Math.max(1, left) });
    if (answer.ok) {
      const summary = withoutThinking(answer.text);
      if (summary !== "") return { summary };
      if (deadline - now() <= 0) return { error: `model "${triage.model}" answered with no text` };
    } else if (!answer.retry || deadline - now() <= 0) return { error: answer.error };
    await Bun.sleep(Math.min(backoffDelay(attempt, { firstMs: MODEL_RETRY_MS, maxMs: MODEL_RETRY_MAX_MS }), Math.max(0, deadline - now())));
  }
}
