/**
 * POST /v1/chat/completions: validate, resolve the route, admit through the Gate, forward, and
 * relay the answer (JSON or SSE) while capturing usage. Every admitted request is settled exactly
 * once and produces exactly one RequestRecord, however it ends: an error nobody expected is
 * settled as a 500 on its way out, so it never leaves credits held. An answer's last byte (a JSON
 * body, a stream's end) waits for the commit of what it is charged (Admission.settle).
 */
import { ERROR_STATUS, GatewayError } from "../errors";
import { IdentifiedDenial, type Admission, type AdmitInput, type Identity } from "../auth/types";
import { presentedKind } from "../auth/gate";
import type { AppDeps, RequestRecord } from "../deps";
import { forwardChat } from "./forward";
import type { ModelRoute } from "./registry";
import { recordTargetComplete, recordTargetFailure, recordTargetRefusal, recordTargetSlow } from "./target-state";
import { relaySse } from "./sse";
import { watchClient, type ClientWatch } from "./client-watch";
import { hundredths } from "../log";
import { completionBound, completionLimit, promptTokenEstimate } from "../credits/price";
import { costMicro, usageFromJson, type Usage } from "./usage";
import { UpstreamFailure } from "./upstream-client";
import { errorExcerpt, withoutSecrets } from "./upstream-text";
import { declaredKind, incompleteAnswer, setWholeAnswerType } from "./answer-type";
import { tokenLimitToSend } from "./upstream-body";

export interface ChatContext {
  request: Request;
  /** The route the body's model names (the endpoint refuses an unknown one). */
  route: ModelRoute;
  body: AdmitInput["body"];
  /** The body's size in bytes as received. */
  bodyBytes: number;
  requestId: string;
  clientIp: () => string;
  startedAt: number;
}

export async function handleChat(deps: AppDeps, ctx: ChatContext): Promise<Response> {
  const route = ctx.route;
  const admitted = deps.gate.admit({ request: ctx.request, clientIp: ctx.clientIp, requestId: ctx.requestId, body: ctx.body, bodyBytes: ctx.bodyBytes, route });
  // Only SpendAuth admits asynchronously; awaiting a plain value would still cost a turn.
  const admission = admitted instanceof Promise ? await admitted : admitted;
  if (admission instanceof GatewayError) {
    const denied = record(ctx.requestId, refusedIdentity(admission, ctx.request), unanswered(route, admission.status), performance.now() - ctx.startedAt);
    deps.onRequestDone(denied);
    admission.options.headers = { ...admission.options.headers, "x-gateway-overhead-ms": hundredths(denied.latencyMs) };
    throw admission;
  }
  const client = watchClient(ctx.request);
  const served = new Served(deps, ctx, admission, client);
  // One function, so the hot path pays for no extra async frame: anything unexpected below is
  // settled as a 500 on its way out (the finish calls before each throw make this a no-op).
  try {
    const clientWantsUsage = (ctx.body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    // The parsed body is ours: amend it in place rather than copying it per request.
    if (ctx.body.stream === true) ctx.body.stream_options = { ...(ctx.body.stream_options as object | undefined), include_usage: true };
    const forwarded = await forwardChat({
      route,
      body: ctx.body,
      client,
      routing: deps.config.routing,
      now: deps.now,
      random: deps.registry.random,
      answerBy: admission.answerBy,
      tokenLimit: completionsPriced(route) ? limitToSend(ctx.body, admission, deps.config.routing.default_max_tokens) : null,
    });
    if ("error" in forwarded) {
      const { error, upstreamMs } = forwarded;
      const latencyMs = served.finish(unanswered(route, error.status, upstreamMs));
      error.options.headers = { ...admission.headers, ...error.options.headers, "x-gateway-overhead-ms": hundredths(latencyMs - upstreamMs) };
      throw error;
    }
    const { reply, target } = forwarded;
    const upstream = target.upstream;
    // The gateway's own time so far: everything except waiting on upstreams (failed attempts included).
    // The admission's headers (x-ratelimit-*) were made for this request: complete them in place.
    const headers = admission.headers;
    headers["x-request-id"] = ctx.requestId;
    const contentType = reply.header("content-type");
    headers["x-gateway-overhead-ms"] = hundredths(performance.now() - ctx.startedAt - forwarded.upstreamMs);
    const done = { upstream: upstream.name, price: route.price, model: route.id };
    /** An answer that cannot be relayed: recorded with `status` (502, 504 for a timeout, or 499 for a client gone), and the error to throw. */
    const unrelayable = (status: number, why: string, upstreamMs: number): GatewayError => {
      served.finish(outcome(done, status, null, upstreamMs));
      return new GatewayError(status === 504 ? "upstream_timeout" : "upstream_error", why, { headers: { ...headers, "content-type": "application/json" } });
    };
    // An answer to a streamed request that names no type, or one neither the stream nor JSON
    // (text/plain: some servers leave the header out or label it wrongly), is the event stream
    // asked for, unless it came whole as a JSON object; one typed JSON (streaming unsupported) is
    // buffered.
    const declared = reply.status < 300 && ctx.body.stream === true ? declaredKind(contentType) : null;
    const early = declared === "other" ? reply.textNow() : null;
    const isStream = declared === "stream" || (declared === "other" && early?.trimStart().startsWith("{") !== true);
    if (isStream) headers["content-type"] = "text/event-stream";
    else if (setWholeAnswerType(headers, contentType) === "stream" && reply.status < 300) {
      // A server that ignores stream: false: no client can read an event stream as the JSON it asked for.
      forwarded.abort("an event stream that was not asked for");
      throw unrelayable(502, `upstream "${upstream.name}" answered with an event stream to a request that did not ask to stream`, forwarded.upstreamMs);
    }
    const bodyStartedAt = performance.now();
    const idleTimeoutMs = upstream.config.idle_timeout_ms;
    if (!isStream) {
      // Usually the whole answer came with its headers; otherwise a body that does not complete
      // within idle_timeout_ms of its headers is abandoned.
      let text = early ?? reply.textNow();
      if (text === null) {
        let late = false;
        const timer = setTimeout(() => {
          late = true;
          forwarded.abort("idle");
        }, idleTimeoutMs);
        try {
          text = await reply.text();
        } catch (err) {
          const why = late ? `upstream "${upstream.name}" did not finish its answer within ${idleTimeoutMs} ms`
            : err instanceof UpstreamFailure && err.kind === "too_large" ? err.message : `upstream "${upstream.name}" broke off its answer`;
          // Answering, but not in time: counted against this model, as a first-byte timeout is.
          if (!client.gone) (late ? recordTargetSlow : recordTargetFailure)(target, deps.now(), why, deps.config.routing);
          throw unrelayable(client.gone ? ERROR_STATUS.client_closed_request : late ? 504 : 502, why, forwarded.upstreamMs + performance.now() - bodyStartedAt);
        } finally {
          clearTimeout(timer);
        }
      }
      const incomplete = reply.status < 300 ? incompleteAnswer(text, reply.closeDelimited) : null;
      if (incomplete !== null) {
        const why = `upstream "${upstream.name}" ${incomplete}`;
        recordTargetFailure(target, deps.now(), why, deps.config.routing);
        throw unrelayable(502, why, forwarded.upstreamMs + performance.now() - bodyStartedAt);
      }
      recordTargetComplete(target, deps.now());
      if (client.goneNow()) throw unrelayable(ERROR_STATUS.client_closed_request, NOT_DELIVERED, forwarded.upstreamMs + performance.now() - bodyStartedAt);
      // Only an answer that is whole and will be delivered is paid for (SpendAuth claims it now).
      if (reply.status < 300) admission.answered?.();
      // An upstream's refusal of the request (400 context too long, 404, 422) reaches the client as
      // it came, less the gateway's credentials for that upstream, should the upstream echo them.
      if (reply.status >= 400) text = withoutSecrets(text, upstream.secrets);
      // An answer without a usage report (some older servers never send one) is charged an estimate, not nothing.
      const usage = usageFromJson(text) ?? (reply.status < 300 ? estimatedUsage(ctx, Math.ceil(text.length / 4), deps.config.routing.default_max_tokens) : null);
      served.finish(outcome(done, reply.status, usage, forwarded.upstreamMs + performance.now() - bodyStartedAt));
      if (served.committed) await served.committed;
      return new Response(text, { status: reply.status, headers });
    }
    if (client.goneNow()) {
      forwarded.abort("client closed");
      throw unrelayable(ERROR_STATUS.client_closed_request, NOT_DELIVERED, forwarded.upstreamMs);
    }
    // A stream is claimed as it begins, while the authorization still holds, however long it runs.
    admission.answered?.();
    headers["cache-control"] = "no-cache";
    const stream = relaySse(early === null ? reply.body() : new Response(early).body!, {
      clientWantsUsage,
      idleTimeoutMs,
      streamTimeoutMs: upstream.config.stream_timeout_ms,
      abortUpstream: forwarded.abort,
      upstreamSecrets: upstream.secrets,
      onEnd: (result) => {
        if (result.outcome === "upstream_error") recordTargetFailure(target, deps.now(), `stream broke: ${result.error}`, deps.config.routing);
        // Answering, but for too long: counted against this model, as a first-byte timeout is.
        else if (result.outcome === "timeout") recordTargetSlow(target, deps.now(), `stream broke: ${result.error}`, deps.config.routing);
        // Reachable, and it closed its stream in good order: this model failed, not the upstream.
        else if (result.outcome === "unfinished") recordTargetRefusal(target, deps.now(), `upstream "${upstream.name}" ended its stream before the answer was complete`, deps.config.routing);
        else if (result.errorEvent !== null) {
          // The upstream's own error event: this model failed (like a 5xx), whether or not the
          // client read on after it (the SDKs stop there, which is no client leaving early).
          const said = errorExcerpt(result.errorEvent, upstream.secrets) ?? "no message";
          recordTargetRefusal(target, deps.now(), `upstream "${upstream.name}" sent an error event: ${said}`, deps.config.routing);
        } else if (result.outcome === "complete") recordTargetComplete(target, deps.now());
        const usage = result.usage ?? estimatedUsage(ctx, result.events, deps.config.routing.default_max_tokens);
        const upstreamMs = forwarded.upstreamMs + performance.now() - bodyStartedAt;
        const status = result.errorEvent !== null ? 502 : STREAM_END_STATUS[result.outcome];
        served.finish(outcome(done, status, usage, upstreamMs));
        return served.committed;
      },
    });
    return new Response(stream, { status: 200, headers });
  } catch (err) {
    served.finish(unanswered(route, err instanceof GatewayError ? err.status : 500));
    throw err;
  }
}

/**
 * Why an answer the upstream gave is neither sent nor charged: the client's connection closed
 * first (Bun closes one on which a request arrives pipelined behind a pending one). Checked just
 * before the answer is handed to Bun, in the same turn of the event loop, so no close can come
 * between the check and the write.
 */
const NOT_DELIVERED = "the client closed the connection before its answer was sent";

/** A route whose completions are charged: its requests' reservations (credits, or a SpendAuth amount) assume a completion limit. */
export function completionsPriced(route: ModelRoute): boolean {
  return !route.free && route.price.completion > 0;
}

/**
 * The completion limit a priced request's upstream is sent: the admission's when it cut the
 * request's to what the balance pays for (llama.cpp's n_predict, read before max_tokens, cut too),
 * else the request's own (tokenLimitToSend).
 */
function limitToSend(body: ChatContext["body"], admission: Admission, defaultMaxTokens: number): number | null {
  const cut = admission.completionLimit;
  if (cut === undefined) return tokenLimitToSend(body, completionLimit(body, defaultMaxTokens));
  if (typeof body.n_predict === "number" && body.n_predict > cut) body.n_predict = cut;
  return cut;
}

/** The request-log status of a stream, by how it ended (the client always saw a 200 header). */
const STREAM_END_STATUS = { complete: 200, upstream_error: 502, unfinished: 502, timeout: 502, client_closed: ERROR_STATUS.client_closed_request } as const;

interface Outcome {
  status: number;
  upstream: string | null;
  usage: Usage | null;
  price: { prompt: number; completion: number };
  model: string;
  upstreamMs: number;
}

function outcome(done: Pick<Outcome, "upstream" | "price" | "model">, status: number, usage: Usage | null, upstreamMs: number): Outcome {
  return { upstream: done.upstream, price: done.price, model: done.model, status, usage, upstreamMs };
}

/** How a request ends that no upstream answered (refused, every attempt failed, an error of ours); `upstreamMs` spent trying. */
function unanswered(route: ModelRoute, status: number, upstreamMs = 0): Outcome {
  return { status, upstream: null, usage: null, price: route.price, model: route.id, upstreamMs };
}

/** An admitted request: settled and recorded once, by whichever way it ends first. */
class Served {
  private finished = false;
  /** The commit of the request's charge, once finished with one. */
  committed: Promise<void> | void = undefined;

  constructor(
    readonly deps: AppDeps,
    readonly ctx: ChatContext,
    readonly admission: Admission,
    readonly client: ClientWatch,
  ) {}

  /** Settles the admission and emits the request record (once); returns the total latency, ms. */
  finish(outcome: Outcome): number {
    const latencyMs = performance.now() - this.ctx.startedAt;
    if (this.finished) return latencyMs;
    this.finished = true;
    this.client.done();
    // As the meter charges it: never more than was reserved (an upstream that ignored the limit it
    // was sent costs the gateway, not the user).
    const charged = Math.min(costMicro(outcome.usage, outcome.price), this.admission.reservedMicro ?? Infinity);
    this.committed = this.admission.settle({ usage: outcome.usage, status: outcome.status, upstream: outcome.upstream, latencyMs });
    this.deps.onRequestDone(record(this.ctx.requestId, this.admission.identity, outcome, latencyMs, charged));
    return latencyMs;
  }
}

/** Who a refusal was for: the identity a rate-limit or credit denial established, else the kind of credential presented (a bad key is not an anonymous caller). */
function refusedIdentity(error: GatewayError, request: Request): Identity {
  if (error instanceof IdentifiedDenial) return error.identity;
  return { kind: presentedKind(request), userId: null, keyId: null, subject: "" };
}

/**
 * The record of a request refused before it reached a route (a bad body, an unknown model, a busy
 * server): no model (an unknown name would be an unbounded metrics label) and no upstream.
 */
export function refusalRecord(request: Request, requestId: string, startedAt: number, error: GatewayError): RequestRecord {
  const outcome: Outcome = { status: error.status, upstream: null, usage: null, price: NO_PRICE, model: "", upstreamMs: 0 };
  return record(requestId, refusedIdentity(error, request), outcome, performance.now() - startedAt);
}

const NO_PRICE = { prompt: 0, completion: 0 };

/** A request's row in the request log; `chargedMicro` what it was charged. */
function record(requestId: string, identity: Identity, outcome: Outcome, latencyMs: number, chargedMicro = 0): RequestRecord {
  return {
    requestId,
    createdAt: Date.now(),
    identity: identity.kind,
    userId: identity.userId,
    keyId: identity.keyId,
    model: outcome.model,
    upstream: outcome.upstream,
    status: outcome.status,
    promptTokens: outcome.usage?.prompt_tokens ?? 0,
    completionTokens: outcome.usage?.completion_tokens ?? 0,
    costMicro: chargedMicro,
    latencyMs,
    upstreamMs: outcome.upstreamMs,
  };
}

/**
 * What an answer the upstream reported no usage for consumed, estimated: the prompt as the
 * reservation estimates it, and the completion as counted by the caller (a stream's events
 * relayed, a JSON answer's characters / 4), at most the completion limit sent (the charge is also
 * capped at the reservation, in Served.finish).
 */
function estimatedUsage(ctx: ChatContext, completionTokens: number, defaultMaxTokens: number): Usage {
  return { prompt_tokens: promptTokenEstimate(ctx.bodyBytes), completion_tokens: Math.min(completionTokens, completionBound(ctx.body, defaultMaxTokens)) };
}
