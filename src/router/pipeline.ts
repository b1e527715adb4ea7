/**
 * The pipeline of every /v1 model call, after ./endpoint.ts has read and checked it: admit through
 * the Gate, forward to the route's targets, and relay the answer (whole, an event stream, or bytes
 * as they come) while capturing usage. What differs per endpoint comes from its adapter
 * (./adapters/types.ts); what each target is sent, from ./call-forms.ts. Every admitted request
 * is settled exactly once and produces exactly one RequestRecord, however it ends: an error nobody
 * expected is settled as a 500 on its way out, so it never leaves credits held. An answer's last
 * byte (a whole body, a stream's end) waits for the commit of what it is charged (Admission.settle).
 */
import { ERROR_STATUS, GatewayError } from "../errors";
import type { Admission } from "../auth/types";
import type { AppDeps } from "../deps";
import { forward } from "./forward";
import { recordTargetComplete, recordTargetFailure, recordTargetRefusal, recordTargetSlow } from "./target-state";
import { relaySse } from "./sse";
import { watchClient } from "./client-watch";
import { hundredths } from "../log";
import { completionLimit } from "../credits/price";
import type { Usage } from "../credits/cost";
import { UpstreamFailure } from "./exchange";
import { errorExcerpt, withoutSecrets } from "./upstream-redaction";
import { declaredKind, incompleteAnswer, setWholeAnswerType } from "./answer-type";
import { tokenLimitToSend } from "./attempt-body";
import { callForms } from "./call-forms";
import { completionsPriced } from "./adapters/chat";
import { servesNatively, type CallBody } from "./adapters/types";
import { relayedBytes } from "./audio-answer";
import { answeredLocally, outcome, record, refusedIdentity, Served, STREAM_END_STATUS, unanswered, type CallContext } from "./served";

export async function handleCall(deps: AppDeps, ctx: CallContext): Promise<Response> {
  const { route, adapter } = ctx;
  const admitted = deps.gate.admit({
    request: ctx.request,
    clientIp: ctx.clientIp,
    requestId: ctx.requestId,
    body: ctx.body,
    bodyBytes: ctx.bodyBytes,
    route,
    reserve: adapter.reserve,
  });
  // Only SpendAuth and a shared limiter admit asynchronously; awaiting a plain value would still cost a turn.
  const admission = admitted instanceof Promise ? await admitted : admitted;
  if (admission instanceof GatewayError) {
    const denied = record(ctx.requestId, refusedIdentity(admission, ctx.request), unanswered(ctx, admission.status), performance.now() - ctx.startedAt);
    deps.onRequestDone(denied);
    admission.options.headers = { ...admission.options.headers, "x-gateway-overhead-ms": hundredths(denied.latencyMs) };
    throw admission;
  }
  const client = watchClient(ctx.request);
  const served = new Served(deps, ctx, admission, client);
  // One function, so the hot path pays for no extra async frame: anything unexpected below is
  // settled as a 500 on its way out (the finish calls before each throw make this a no-op).
  try {
    const checked = adapter.admitted?.(ctx.body, admission.identity);
    if (checked) await checked;
    if (adapter.answerLocally !== undefined && !route.targets.every((target) => servesNatively(adapter, target)))
      return await answeredLocally(served, adapter.answerLocally(ctx.body));
    const completion = adapter.answer === "completion";
    const clientWantsUsage = adapter.keepUsageChunk === true || (ctx.body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const streamed = completion && ctx.body.stream === true;
    const tokenLimit = completion && completionsPriced(route) ? limitToSend(ctx.body, admission, deps.config.routing.default_max_tokens) : null;
    const forwarded = await forward({
      route,
      ...callForms(ctx, { streamed, tokenLimit }),
      client,
      routing: deps.config.routing,
      now: deps.now,
      random: deps.registry.random,
      answerBy: admission.answerBy,
    });
    if ("error" in forwarded) {
      const { error, upstreamMs } = forwarded;
      const latencyMs = served.finish(unanswered(ctx, error.status, upstreamMs));
      error.options.headers = { ...admission.headers, ...error.options.headers, "x-gateway-overhead-ms": hundredths(latencyMs - upstreamMs) };
      throw error;
    }
    const { reply, target } = forwarded;
    const upstream = target.upstream;
    const native = adapter.native;
    /** The answering target was sent the native form: its answer is read as that form's. */
    const sentNative = native !== undefined && servesNatively(adapter, target);
    // The gateway's own time so far: everything except waiting on upstreams (failed attempts included).
    // The admission's headers (x-ratelimit-*) were made for this request: complete them in place.
    const headers = admission.headers;
    headers["x-request-id"] = ctx.requestId;
    const contentType = reply.header("content-type");
    headers["x-gateway-overhead-ms"] = hundredths(performance.now() - ctx.startedAt - forwarded.upstreamMs);
    const done = { upstream: upstream.name, price: route.price, model: route.id, endpoint: adapter.name };
    /** An answer that cannot be relayed: recorded with `status` (502, 504 for a timeout, or 499 for a client gone), and the error to throw. */
    const unrelayable = (status: number, why: string, upstreamMs: number): GatewayError => {
      served.finish(outcome(done, status, null, upstreamMs));
      return new GatewayError(status === 504 ? "upstream_timeout" : "upstream_error", why, { headers: { ...headers, "content-type": "application/json" } });
    };
    // An answer to a streamed request that names no type, or one neither the stream nor JSON
    // (text/plain: some servers leave the header out or label it wrongly), is the event stream
    // asked for, unless it came whole as a JSON object; one typed JSON (streaming unsupported) is
    // buffered.
    const bytes = adapter.answer === "bytes" && reply.status < 300;
    const declared = reply.status < 300 && completion && ctx.body.stream === true ? declaredKind(contentType) : null;
    const early = declared === "other" ? reply.textNow() : null;
    const isStream = declared === "stream" || (declared === "other" && early?.trimStart().startsWith("{") !== true);
    if (isStream) headers["content-type"] = "text/event-stream";
    else if (!bytes && setWholeAnswerType(headers, contentType) === "stream" && reply.status < 300) {
      // A server that ignores stream: false: no client can read an event stream as the JSON it asked for.
      forwarded.abort("an event stream that was not asked for");
      throw unrelayable(502, `upstream "${upstream.name}" answered with an event stream to a request that did not ask to stream`, forwarded.upstreamMs);
    }
    const bodyStartedAt = performance.now();
    const idleTimeoutMs = upstream.config.idle_timeout_ms;
    if (!isStream && !bytes) {
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
          const why = late
            ? `upstream "${upstream.name}" did not finish its answer within ${idleTimeoutMs} ms`
            : err instanceof UpstreamFailure && err.kind === "too_large"
              ? err.message
              : `upstream "${upstream.name}" broke off its answer`;
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
      if (reply.status < 300) {
        const written = admission.answered?.();
        if (written) await written;
      }
      // An upstream's refusal of the request (400 context too long, 404, 422) reaches the client as
      // it came, less the gateway's credentials for that upstream, should the upstream echo them.
      if (reply.status >= 400) text = withoutSecrets(text, upstream.secrets);
      // An answer without a usage report (some older servers never send one) is charged an estimate, not nothing.
      const usage =
        (sentNative ? native!.usage : adapter.usage)(text) ??
        (reply.status < 300 ? estimatedUsage(ctx, Math.ceil(text.length / 4), deps.config.routing.default_max_tokens) : null);
      served.finish(outcome(done, reply.status, usage, forwarded.upstreamMs + performance.now() - bodyStartedAt));
      if (served.committed) await served.committed;
      if (reply.status < 300 && adapter.transformWhole) {
        const transformed = adapter.transformWhole(text, ctx.body, target);
        text = typeof transformed === "string" ? transformed : await transformed;
      } else if (reply.status >= 400 && adapter.transformError) text = adapter.transformError(text, reply.status);
      return new Response(text, { status: reply.status, headers });
    }
    if (client.goneNow()) {
      forwarded.abort("client closed");
      throw unrelayable(ERROR_STATUS.client_closed_request, NOT_DELIVERED, forwarded.upstreamMs);
    }
    // A stream (events or audio) is claimed as it begins, while the authorization still holds, however long it runs.
    const written = admission.answered?.();
    if (written) await written;
    if (bytes) return relayedBytes(deps, served, forwarded, headers, done);
    headers["cache-control"] = "no-cache";
    const stream = relaySse(early === null ? reply.body() : new Response(early).body!, {
      clientWantsUsage,
      idleTimeoutMs,
      streamTimeoutMs: upstream.config.stream_timeout_ms,
      abortUpstream: forwarded.abort,
      upstreamSecrets: upstream.secrets,
      dialect: sentNative ? native!.stream : undefined,
      rewrite: adapter.rewriteEvents?.(ctx.body, target) ?? undefined,
      onEnd: (result) => {
        if (result.outcome === "upstream_error") recordTargetFailure(target, deps.now(), `stream broke: ${result.error}`, deps.config.routing);
        // Answering, but for too long: counted against this model, as a first-byte timeout is.
        else if (result.outcome === "timeout") recordTargetSlow(target, deps.now(), `stream broke: ${result.error}`, deps.config.routing);
        // Reachable, and it closed its stream in good order: this model failed, not the upstream.
        else if (result.outcome === "unfinished")
          recordTargetRefusal(target, deps.now(), `upstream "${upstream.name}" ended its stream before the answer was complete`, deps.config.routing);
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
    served.finish(unanswered(ctx, err instanceof GatewayError ? err.status : 500));
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

/**
 * The completion limit a priced request's upstream is sent: the admission's when it cut the
 * request's to what the balance pays for (llama.cpp's n_predict, read before max_tokens, cut too),
 * else the request's own (tokenLimitToSend).
 */
function limitToSend(body: CallBody, admission: Admission, defaultMaxTokens: number): number | null {
  const cut = admission.completionLimit;
  if (cut === undefined) return tokenLimitToSend(body, completionLimit(body, defaultMaxTokens));
  if (typeof body.n_predict === "number" && body.n_predict > cut) body.n_predict = cut;
  return cut;
}

/**
 * What an answer the upstream reported no usage for consumed, as its adapter estimates it from
 * `completionTokens` (a stream's events relayed, a whole answer's characters / 4); the charge is
 * also capped at the reservation, in Served.finish.
 */
function estimatedUsage(ctx: CallContext, completionTokens: number, defaultMaxTokens: number): Usage {
  return ctx.adapter.estimate({ body: ctx.body, bodyBytes: ctx.bodyBytes, defaultMaxTokens, completionTokens });
}
