/**
 * `modelgate jobs list [--state pending|leased|done|dead] [--limit N] [--json]` and
 * `modelgate jobs retry CALL_ID`: inspect and replay the webhook outbox. Safe while the server
 * runs (WAL, or Postgres shared with the replicas; the server sees a retried call at its next poll).
 */
import { JOB_STATES, listJobs, retryJob, type JobSummary } from "../webhooks/admin";
import type { JobState } from "../webhooks/calls";
import { command, type CliContext } from "./registry";
import { idOperand, stringFlag, UsageError } from "./args";
import { formatTable } from "./table";

const USAGE = "usage: modelgate jobs list [--state pending|leased|done|dead] [--limit N] [--json] | jobs retry CALL_ID";

/** At most `max` characters, an ellipsis marking a cut (`jobs list --json` has the whole text). */
function clip(text: string, max: number): string {
  const chars = [...text];
  return chars.length > max ? `${chars.slice(0, max - 1).join("")}…` : text;
}

function iso(ms: number | null): string {
  return ms === null ? "-" : new Date(ms).toISOString();
}

function printTable(ctx: CliContext, rows: JobSummary[]): void {
  if (rows.length === 0) {
    ctx.print("no webhook calls");
    return;
  }
  const header = ["CALL_ID", "JOB_ID", "STATE", "ATTEMPTS", "BYTES", "CREATED", "LEASE_UNTIL", "PATH", "NAME", "LAST_ERROR"];
  const lines = rows.map((r) => [
    String(r.callId),
    String(r.jobId),
    r.state,
    String(r.attempts),
    String(r.bytes),
    iso(r.createdAt),
    iso(r.leaseUntil),
    r.path,
    r.name ?? "-",
    clip((r.lastError ?? "-").replace(/\s+/g, " "), 80),
  ]);
  for (const line of formatTable([header, ...lines])) ctx.print(line);
}

async function list(ctx: CliContext): Promise<number> {
  const state = stringFlag(ctx.args, "state");
  if (state !== undefined && !(JOB_STATES as readonly string[]).includes(state)) {
    throw new UsageError(`--state must be one of ${JOB_STATES.join(", ")}`);
  }
  const limitFlag = stringFlag(ctx.args, "limit");
  const limit = limitFlag === undefined ? 100 : /^\d{1,7}$/.test(limitFlag) ? Number(limitFlag) : NaN;
  if (!(limit >= 1 && limit <= 1_000_000)) throw new UsageError("--limit must be a whole number from 1 to 1000000");
  const opened = await ctx.openDb();
  try {
    const rows = await listJobs(opened.db, { state: state as JobState | undefined, limit });
    if (ctx.args.flags.has("json")) ctx.print(JSON.stringify(rows));
    else printTable(ctx, rows);
  } finally {
    await opened.close();
  }
  return 0;
}

async function retry(ctx: CliContext): Promise<number> {
  const callId = idOperand(ctx.args.positionals[2], "usage: modelgate jobs retry CALL_ID");
  const opened = await ctx.openDb();
  try {
    const result = await retryJob(opened.db, callId, Date.now());
    if (!result.ok) {
      console.error(
        result.reason === "not_found"
          ? `modelgate: no webhook call ${callId}`
          : result.reason === "pending"
            ? `modelgate: call ${callId} is pending: it waits for its consumer (a [[jobs]] handler, the pull API), which gets it by itself; retry a call once it is done or dead`
            : `modelgate: call ${callId} is leased to a consumer, which may still be running it; retry it once it is done or dead, or its lease has run out`,
      );
      return 1;
    }
    ctx.print(`call ${callId} (${result.previous}) is pending again with a fresh attempt budget`);
    return 0;
  } finally {
    await opened.close();
  }
}

export const jobsCommand = command(
  (ctx) => {
    const sub = ctx.args.positionals[1];
    if (sub === "list") return list(ctx);
    if (sub === "retry") return retry(ctx);
    throw new UsageError(USAGE);
  },
  {
    list: { flags: ["state", "limit", "json"], words: 2 },
    retry: { flags: [], words: 3 },
  },
);
