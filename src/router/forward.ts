/**
 * Sends one request to a route's targets until one answers. Connection errors, timeouts, 429,
 * 5xx, and an upstream refusing the gateway's own credentials (401, 403, 407: a config error the
 * client can do nothing about, and must not mistake for a refusal of its key) move on to the next
 * target at once; when every target has been tried and attempts
 * remain (`max_attempts`), targets are tried again after an exponential backoff, except those that
 * timed out (a timeout is too expensive to repeat). All of this happens before the client has
 * seen a byte, so a retry can never duplicate a partial answer.
 */
import type { Config } from "../config/schema";
import { backoffDelay } from "../backoff";
import { GatewayError } from "../errors";
import { checkConnect } from "./connect";
import type { ModelRoute, Target } from "./registry";
import type { ClientWatch } from "./client-watch";
import { orderTargets } from "./select";
import { UpstreamFailure, type UpstreamExchange, type UpstreamReply } from "./exchange";
import { USES_PROXY } from "./fetch-exchange";
import { errorExcerpt } from "./upstream-redaction";
import { failedAnswer } from "./failed-answer";
import {
  abandonTargetAttempt,
  beginTargetAttempt,
  recordTargetAnswered,
  recordTargetFailure,
  recordTargetRefusal,
  recordTargetSlow,
  targetAvailable,
  targetCoolsUntil,
} from "./target-state";

export interface ForwardInput {
  route: ModelRoute;
  /** Under each upstream's base_url (`chat/completions`), or per target (an API some upstreams serve natively). */
  upstreamPath: string | ((target: Target) => string);
  /**
   * What one target is sent: JSON text, or an upload's stream with `contentType`; null when it
   * cannot be sent (JSON nested too deeply, or an upload already sent to an earlier target).
   */
  payload: (target: Target) => string | ReadableStream<Uint8Array> | null;
  contentType?: string;
  /** Headers of the client's request sent on to a target (a native API's version and beta flags); none when absent or undefined. */
  headersFor?: (target: Target) => Readonly<Record<string, string>> | undefined;
  /** Why the request's own body failed to go out (an upload over the limit, or cut off by its client): no target's fault. */
  bodyFailure?: () => GatewayError | null;
  /** Reports a client that went away; each attempt points its onGone at its own exchange. */
  client: ClientWatch;
  routing: Config["routing"];
  now: () => number;
  random?: () => number;
  /** Epoch ms by which an upstream must have answered (the identity's Admission.answerBy). */
  answerBy?: number;
}

export interface Forwarded {
  reply: UpstreamReply;
  target: Target;
  /** Aborts the chosen upstream request (idle timeout, client gone). */
  abort: (reason: string) => void;
  /** Time spent waiting on upstreams until response headers, failed attempts included, ms. */
  upstreamMs: number;
  attempts: number;
}

/** No upstream answered: the error for the client, and the time spent trying (waits and backoff). */
export interface Unforwarded {
  error: GatewayError;
  upstreamMs: number;
}

/** An upstream not heard from for this long may have lost its pooled connections: check connect. */
const COLD_AFTER_MS = 30_000;

export async function forward(input: ForwardInput): Promise<Forwarded | Unforwarded> {
  const { route, routing, now } = input;
  const order = orderTargets(route, now(), input.random);
  if (order.length === 0) return { error: allCoolingDown(route, now()), upstreamMs: 0 };
  let lastFailure: AttemptFailure | null = null;
  let timedOut: Set<Target> | null = null;
  let upstreamMs = 0;
  for (let i = 0; i < routing.max_attempts; i++) {
    const round = Math.floor(i / order.length);
    const target = order[i % order.length];
    if (round > 0) {
      if (timedOut?.has(target) || !targetAvailable(target, now())) continue;
      if (routing.retry_backoff_ms > 0) {
        // Waiting to try upstreams again is upstream time, not the gateway's own.
        const slept = performance.now();
        await Bun.sleep(backoffDelay(round, { firstMs: routing.retry_backoff_ms, maxMs: Number.POSITIVE_INFINITY }));
        upstreamMs += performance.now() - slept;
      }
    }
    // Earlier attempts took time: a target whose circuit opened meanwhile (other requests' failures),
    // or that another request is probing, is skipped like one that was unavailable at the start.
    if (i > 0 && !targetAvailable(target, now())) continue;
    if (input.client.gone) break;
    const payload = input.payload(target);
    if (payload === null) {
      if (lastFailure !== null) break;
      return { error: new GatewayError("invalid_request_error", "The request body is nested too deeply to be forwarded"), upstreamMs };
    }
    beginTargetAttempt(target, now());
    const started = performance.now();
    const outcome = await attempt(target, payload, input, now());
    const elapsed = performance.now() - started;
    upstreamMs += elapsed;
    if (!("failure" in outcome)) {
      recordTargetAnswered(target, elapsed);
      return { reply: outcome.reply, abort: outcome.abort, target, upstreamMs, attempts: i + 1 };
    }
    const bodyFailure = input.bodyFailure?.() ?? null;
    if (bodyFailure !== null) {
      abandonTargetAttempt(target);
      return { error: bodyFailure, upstreamMs };
    }
    if (input.client.gone || outcome.failure === "deadline") {
      // Neither is the upstream's fault: a client that left, or an answer due sooner than the
      // upstream's own timeout (a payment that must be claimed first). Nothing to try after either.
      abandonTargetAttempt(target);
      lastFailure = outcome;
      break;
    }
    if (outcome.failure === "refused") recordTargetRefusal(target, now(), outcome.message, routing);
    else if (outcome.failure === "slow") recordTargetSlow(target, now(), outcome.message, routing);
    else recordTargetFailure(target, now(), outcome.message, routing);
    if (outcome.failure === "timeout" || outcome.failure === "slow") (timedOut ??= new Set()).add(target);
    lastFailure = outcome;
  }
  if (input.client.gone) return { error: new GatewayError("client_closed_request", "the client went away before an upstream answered"), upstreamMs };
  const late = lastFailure!.failure === "timeout" || lastFailure!.failure === "slow" || lastFailure!.failure === "deadline";
  return { error: new GatewayError(late ? "upstream_timeout" : "upstream_error", lastFailure!.message), upstreamMs };
}

/** A failed attempt, as a plain value: errors with stack traces are built once, for the client. */
interface AttemptFailure {
  /**
   * timeout: no connection within connect_timeout_ms; refused: the upstream answered this model
   * with 429 or 5xx; slow: connected, but no answer within first_byte_timeout_ms (refused and slow
   * count against the target's circuit: a request that makes one model slow, a long generation on
   * a busy box, must not stop the upstream's other models); deadline: no answer by the identity's
   * answerBy, sooner than the upstream's own timeout.
   */
  failure: "timeout" | "slow" | "error" | "refused" | "deadline";
  message: string;
}

function allCoolingDown(route: ModelRoute, now: number): GatewayError {
  let until = Infinity;
  for (const t of route.targets) until = Math.min(until, targetCoolsUntil(t, now));
  const seconds = Math.max(1, Math.ceil((until - now) / 1000));
  return new GatewayError("service_unavailable", `every target of model "${route.id}" is cooling down after repeated failures; try again in ${seconds} s`, {
    headers: { "retry-after": String(seconds) },
  });
}

async function attempt(
  target: Target,
  payload: string | ReadableStream<Uint8Array>,
  input: ForwardInput,
  now: number,
): Promise<Pick<Forwarded, "reply" | "abort"> | AttemptFailure> {
  const upstream = target.upstream;
  const cold = upstream.lastContactAt === null || now - upstream.lastContactAt > COLD_AFTER_MS;
  if (upstream.viaFetch && cold && !USES_PROXY) {
    const reach = await checkConnect(upstream.hostname, upstream.port, upstream.config.connect_timeout_ms);
    if (reach === "timeout") {
      return { failure: "timeout", message: `upstream "${upstream.name}" did not accept a connection within ${upstream.config.connect_timeout_ms} ms` };
    }
    if (reach !== "ok")
      return {
        failure: "error",
        message: `upstream "${upstream.name}" is unreachable (${reach === "refused" ? "connection refused" : "its host name did not resolve"})`,
      };
  }
  const path = typeof input.upstreamPath === "string" ? input.upstreamPath : input.upstreamPath(target);
  const exchange = upstream.post(path, payload, input.contentType, input.headersFor?.(target));
  const abort = (reason: string): void => exchange.abort(reason);
  const client = input.client;
  client.onGone = abort;
  const waitMs = firstByteWait(upstream.config.first_byte_timeout_ms, input.answerBy, now);
  client.answerWithin(waitMs);
  try {
    const reply = await exchange.reply;
    client.answered();
    upstream.lastContactAt = now;
    const failed = failedAnswer(upstream, reply);
    if (failed !== null) {
      client.onGone = null;
      const text = await readSmall(reply, exchange, upstream.config.idle_timeout_ms);
      // What a failing upstream says (out of memory, model not loaded) helps whoever reads the 502.
      // Not for the other failures: a refusal of the gateway's own credentials may quote the key,
      // and an encoded body is not text.
      const refused = reply.status === 429 || reply.status >= 500;
      const said = text !== null && refused ? errorExcerpt(text, upstream.secrets) : null;
      return { failure: refused ? "refused" : "error", message: said === null ? failed : `${failed}: ${said}` };
    }
    return { reply, abort };
  } catch (err) {
    client.answered();
    client.onGone = null;
    if (client.timedOut) {
      if (waitMs < upstream.config.first_byte_timeout_ms) {
        return {
          failure: "deadline",
          message: `upstream "${upstream.name}" did not answer within ${waitMs} ms (the time left to claim the payment before its authorization expires)`,
        };
      }
      return { failure: "slow", message: `upstream "${upstream.name}" did not answer within ${waitMs} ms` };
    }
    if (err instanceof UpstreamFailure && err.kind === "connect_timeout") return { failure: "timeout", message: err.message };
    if (err instanceof UpstreamFailure && err.kind !== "aborted") return { failure: "error", message: err.message };
    return { failure: "error", message: `upstream "${upstream.name}" is unreachable` };
  }
}

/**
 * How long an attempt may wait for its answer: the upstream's first-byte timeout, or less when
 * the request must be answered by `answerBy`, in whole seconds (deadlines share one timer per
 * distinct wait, so the distinct waits stay few).
 */
function firstByteWait(timeoutMs: number, answerBy: number | undefined, now: number): number {
  if (answerBy === undefined) return timeoutMs;
  return Math.min(timeoutMs, Math.max(0, Math.floor((answerBy - now) / 1000) * 1000));
}

/**
 * Reads a small error body to its end, so the keep-alive connection is reused, and returns it;
 * gives up on a large or slow one (null).
 */
async function readSmall(reply: UpstreamReply, exchange: UpstreamExchange, timeoutMs: number): Promise<string | null> {
  const length = Number(reply.header("content-length") ?? Infinity);
  if (length > 65_536) {
    exchange.abort("discarded");
    return null;
  }
  const timer = setTimeout(() => exchange.abort("discarded"), timeoutMs);
  const text = await reply.text().catch(() => null);
  clearTimeout(timer);
  return text;
}
