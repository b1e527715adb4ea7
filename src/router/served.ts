/**
 * An admitted call as the pipeline (./pipeline.ts) carries it: its context, how it ended (an
 * Outcome), and Served, which settles its admission and emits its request record exactly once,
 * whichever way the call ends first. Also the record of a request refused before admission, and
 * the answer to an admitted call the gateway gives itself (answeredLocally).
 */
import { ERROR_STATUS, type GatewayError } from "../errors";
import { IdentifiedDenial, type Admission, type Identity } from "../auth/types";
import { presentedKind } from "../auth/presented";
import type { AppDeps } from "../deps";
import type { RequestRecord } from "../requests/record";
import type { ModelRoute } from "./registry";
import type { ClientWatch } from "./client-watch";
import { costMicro, type Usage } from "../credits/cost";
import type { CallBody, EndpointAdapter } from "./adapters/types";
import type { EndpointName } from "../config/schema";
import type { Upload } from "./upload";
import { hundredths } from "../log";

export interface CallContext {
  request: Request;
  adapter: EndpointAdapter;
  /** A multipart call's upload, streamed to the target (its body is then just the model). */
  upload: Upload | null;
  /** The route the body's model names (the endpoint refuses an unknown one). */
  route: ModelRoute;
  body: CallBody;
  /** The body's size in bytes as received. */
  bodyBytes: number;
  requestId: string;
  clientIp: () => string;
  startedAt: number;
}

/** The request-log status of a stream, by how it ended (the client always saw a 200 header). */
export const STREAM_END_STATUS = {
  complete: 200,
  upstream_error: 502,
  unfinished: 502,
  timeout: 502,
  client_closed: ERROR_STATUS.client_closed_request,
} as const;

export interface Outcome {
  status: number;
  upstream: string | null;
  usage: Usage | null;
  price: ModelRoute["price"];
  model: string;
  /** "" for a request refused before its endpoint was known. */
  endpoint: EndpointName | "";
  upstreamMs: number;
}

export function outcome(done: Pick<Outcome, "upstream" | "price" | "model" | "endpoint">, status: number, usage: Usage | null, upstreamMs: number): Outcome {
  return { upstream: done.upstream, price: done.price, model: done.model, endpoint: done.endpoint, status, usage, upstreamMs };
}

/** How a request ends that no upstream answered (refused, every attempt failed, an error of ours); `upstreamMs` spent trying. */
export function unanswered(ctx: CallContext, status: number, upstreamMs = 0): Outcome {
  return { status, upstream: null, usage: null, price: ctx.route.price, model: ctx.route.id, endpoint: ctx.adapter.name, upstreamMs };
}

/** An admitted request: settled and recorded once, by whichever way it ends first. */
export class Served {
  private finished = false;
  /** The commit of the request's charge, once finished with one. */
  committed: Promise<void> | void = undefined;

  constructor(
    readonly deps: AppDeps,
    readonly ctx: CallContext,
    readonly admission: Admission,
    readonly client: ClientWatch,
  ) {}

  /** Settles the admission and emits the request record (once); returns the total latency, ms. */
  finish(outcome: Outcome): number {
    const latencyMs = performance.now() - this.ctx.startedAt;
    if (this.finished) return latencyMs;
    this.finished = true;
    this.client.done();
    this.ctx.upload?.dispose();
    // As the meter charges it: never more than was reserved (an upstream that ignored the limit it
    // was sent costs the gateway, not the user).
    const charged = Math.min(costMicro(outcome.usage, outcome.price), this.admission.reservedMicro ?? Infinity);
    this.committed = this.admission.settle({ usage: outcome.usage, status: outcome.status, upstream: outcome.upstream, latencyMs });
    this.deps.onRequestDone(record(this.ctx.requestId, this.admission.identity, outcome, latencyMs, charged));
    return latencyMs;
  }
}

/** An answer the adapter gives without an upstream (an estimate): admitted, recorded, charged nothing. */
export async function answeredLocally(served: Served, text: string): Promise<Response> {
  const { ctx, admission } = served;
  served.finish(unanswered(ctx, 200));
  if (served.committed) await served.committed;
  const headers = admission.headers;
  headers["x-request-id"] = ctx.requestId;
  headers["content-type"] = "application/json";
  headers["x-gateway-overhead-ms"] = hundredths(performance.now() - ctx.startedAt);
  return new Response(text, { status: 200, headers });
}

/** Who a refusal was for: the identity a rate-limit or credit denial established, else the kind of credential presented (a bad key is not an anonymous caller). */
export function refusedIdentity(error: GatewayError, request: Request): Identity {
  if (error instanceof IdentifiedDenial) return error.identity;
  return { kind: presentedKind(request), userId: null, keyId: null, subject: "" };
}

/**
 * The record of a request refused before it reached a route (a bad body, an unknown model, a busy
 * server): no model (an unknown name would be an unbounded metrics label) and no upstream.
 */
export function refusalRecord(request: Request, requestId: string, startedAt: number, error: GatewayError, endpoint: EndpointName | ""): RequestRecord {
  const outcome: Outcome = { status: error.status, upstream: null, usage: null, price: NO_PRICE, model: "", endpoint, upstreamMs: 0 };
  return record(requestId, refusedIdentity(error, request), outcome, performance.now() - startedAt);
}

const NO_PRICE = { prompt: 0, completion: 0, request: 0 };

/** A request's row in the request log; `chargedMicro` what it was charged. */
export function record(requestId: string, identity: Identity, outcome: Outcome, latencyMs: number, chargedMicro = 0): RequestRecord {
  return {
    requestId,
    createdAt: Date.now(),
    identity: identity.kind,
    userId: identity.userId,
    keyId: identity.keyId,
    model: outcome.model,
    endpoint: outcome.endpoint,
    upstream: outcome.upstream,
    status: outcome.status,
    promptTokens: outcome.usage?.prompt_tokens ?? 0,
    completionTokens: outcome.usage?.completion_tokens ?? 0,
    costMicro: chargedMicro,
    latencyMs,
    upstreamMs: outcome.upstreamMs,
  };
}
