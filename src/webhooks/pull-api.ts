/**
 * The pull API for external runners, served on the webhook gateway's port and guarded by
 * `Authorization: Bearer <webhooks.pull_token>` (compared in constant time):
 *
 *   POST /webhooks/jobs/claim            {"max"?: 1..100, "lease_ms"?: n, "job_ids"?: [n]}
 *        -> 200 {"jobs": [{call_id, job_id, attempt, lease_until, content_type, metadata, body_base64}]}
 *   POST /webhooks/jobs/{call_id}/ack    {"attempt": n}                 -> 200 {"call_id","state":"done"}
 *   POST /webhooks/jobs/{call_id}/fail   {"attempt": n, "error"?: s}    -> 200 {"call_id","state":"pending"|"dead"}
 *   POST /webhooks/jobs/{call_id}/extend {"attempt": n, "lease_ms"?: n} -> 200 {"call_id","lease_until"}
 *
 * ack/fail/extend answer 409 {"error":"lease_lost","call_id":N} when the caller no longer holds the lease
 * (it expired and another runner took the call). Bodies travel as base64 so they stay byte exact.
 */
import { timingSafeEqual } from "node:crypto";
import { bearerToken } from "../auth/tokens";
import type { Outbox } from "./outbox";
import { jobMetadata } from "./producer";
import { PULL_PREFIX } from "./config";

const MAX_CLAIM = 100;
const MAX_LEASE_MS = 24 * 3_600_000;

function json(status: number, body: unknown): Response {
  return Response.json(body, { status });
}

function digest(value: string): Buffer {
  return new Bun.CryptoHasher("sha256").update(value).digest() as Buffer;
}

function positiveInt(value: unknown, max: number): number | null {
  return typeof value === "number" && Number.isInteger(value) && value >= 1 && value <= max ? value : null;
}

async function readObject(request: Request): Promise<Record<string, unknown> | null> {
  const text = await request.text();
  if (text.trim() === "") return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export function createPullApi(outbox: Outbox, token: string): (request: Request, path: string) => Promise<Response> {
  const expected = digest(token);
  const authorized = (request: Request): boolean => {
    const presented = bearerToken(request.headers.get("authorization"));
    return presented !== null && timingSafeEqual(digest(presented), expected);
  };

  return async (request, path) => {
    if (!authorized(request)) return json(401, { error: "unauthorized" });
    if (request.method !== "POST")
      return new Response(JSON.stringify({ error: "method_not_allowed" }), { status: 405, headers: { allow: "POST", "content-type": "application/json" } });
    const input = await readObject(request);
    if (input === null) return json(400, { error: "invalid_request", message: "the body must be a JSON object" });
    const rest = path.slice(PULL_PREFIX.length);
    if (rest === "claim") return claim(outbox, input);
    const match = /^([0-9]{1,15})\/(ack|fail|extend)$/.exec(rest);
    if (!match) return json(404, { error: "not_found" });
    const callId = Number(match[1]);
    const attempt = positiveInt(input.attempt, 1_000_000);
    if (attempt === null) return json(400, { error: "invalid_request", message: "attempt: the attempt number from the claim is required" });
    switch (match[2]) {
      case "ack":
        return (await outbox.ack(callId, attempt)) ? json(200, { call_id: callId, state: "done" }) : lost(callId);
      case "fail": {
        const error = typeof input.error === "string" ? input.error : "failed by runner";
        const state = await outbox.fail(callId, attempt, error);
        return state === null ? lost(callId) : json(200, { call_id: callId, state });
      }
      default: {
        const leaseMs = input.lease_ms === undefined ? undefined : positiveInt(input.lease_ms, MAX_LEASE_MS);
        if (leaseMs === null) return json(400, { error: "invalid_request", message: `lease_ms: an integer from 1 to ${MAX_LEASE_MS}` });
        const until = await outbox.extend(callId, attempt, leaseMs);
        return until === null ? lost(callId) : json(200, { call_id: callId, lease_until: until });
      }
    }
  };
}

function lost(callId: number): Response {
  return json(409, { error: "lease_lost", call_id: callId });
}

async function claim(outbox: Outbox, input: Record<string, unknown>): Promise<Response> {
  const max = input.max === undefined ? 1 : positiveInt(input.max, MAX_CLAIM);
  if (max === null) return json(400, { error: "invalid_request", message: `max: an integer from 1 to ${MAX_CLAIM}` });
  const leaseMs = input.lease_ms === undefined ? undefined : positiveInt(input.lease_ms, MAX_LEASE_MS);
  if (leaseMs === null) return json(400, { error: "invalid_request", message: `lease_ms: an integer from 1 to ${MAX_LEASE_MS}` });
  let jobIds: number[] | undefined;
  if (input.job_ids !== undefined) {
    if (!Array.isArray(input.job_ids) || !input.job_ids.every((id) => Number.isInteger(id) && id >= 0)) {
      return json(400, { error: "invalid_request", message: "job_ids: an array of job ids" });
    }
    jobIds = input.job_ids as number[];
  }
  const rows = await outbox.claim({ limit: max, leaseMs, jobIds });
  return json(200, {
    jobs: rows.map((row) => ({
      call_id: row.callId,
      job_id: row.jobId,
      attempt: row.attempt,
      lease_until: row.leaseUntil,
      content_type: row.contentType,
      metadata: jobMetadata(row),
      body_base64: Buffer.from(row.body).toString("base64"),
    })),
  });
}
