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
 * made are not made again.
 */
import type { Database } from "bun:sqlite";
import type { JobHandlerConfig, TriageConfig } from "../../config/webhooks-schema";
import type { Outbox } from "../outbox";
import { METADATA, type JobCall } from "../producer";
import type { AlertGroup } from "./alert";
import { parseAlert } from "./parse";
import { renderPrompt } from "./prompt";
import { withoutThinking, type ModelCaller } from "./model";
import { addDeliveries, alertByCall, countSince, insertAlert, lastOfGroup, openDigest, setSummary, type AlertRow } from "./store";
import { backoffDelay } from "../../backoff";
import { ackCall } from "../store";

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
  const ack = (): void => void ackCall(outbox.sqlite, call.callId, call.attempt, outbox.now());
  const group = parseAlert(call);
  const { path, name } = origin(call);
  const found = alertByCall(outbox.sqlite, call.callId);
  const row =
    found ??
    (await outbox.transact(() => {
      const recorded = recordAlert(outbox.sqlite, job, call, group, outbox.now());
      if (recorded.state !== "triaging") ack();
      return recorded;
    }));
  if (row.state !== "triaging") {
    if (found !== null) await outbox.transact(ack);
    return;
  }
  const prompt = renderPrompt(job.triage.prompt, { group, body: new TextDecoder().decode(call.body), endpoint: path, name });
  const answer = await askModel(job.triage, prompt, deps.callModel, outbox.now);
  await outbox.transact(() => {
    setSummary(outbox.sqlite, row.id, answer);
    addDeliveries(
      outbox.sqlite,
      row.id,
      job.notify.map((n) => n.kind),
      outbox.now(),
    );
    ack();
  });
  deps.delivered();
}

/** The call's alert row, deciding whether it is a repeat, part of a storm, or to be triaged. */
function recordAlert(sqlite: Database, job: TriageJob, call: JobCall, group: AlertGroup, now: number): AlertRow {
  const { path } = origin(call);
  const last = group.groupKey === null ? null : lastOfGroup(sqlite, job.job_id, group.groupKey);
  const base = alertFields(job, path, call.callId, group, now);
  if (last !== null && group.dedupeKey !== null && last.dedupe_key === group.dedupeKey) return insertAlert(sqlite, { ...base, state: "duplicate" });
  if (group.status === "resolved" && group.groupKey !== null) base.refers_to = lastOfGroup(sqlite, job.job_id, group.groupKey, "firing")?.id ?? null;
  if (countSince(sqlite, job.job_id, path, now - STORM_WINDOW_MS, job.triage.storm_per_minute) < job.triage.storm_per_minute)
    return insertAlert(sqlite, { ...base, state: "triaging" });
  let digest = openDigest(sqlite, job.job_id, path, now);
  if (digest === null) {
    const dueAt = now + job.triage.digest_window_s * 1000;
    digest = insertAlert(sqlite, {
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
    addDeliveries(
      sqlite,
      digest.id,
      job.notify.map((n) => n.kind),
      dueAt,
    );
  }
  return insertAlert(sqlite, { ...base, state: "held", digest_id: digest.id });
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
