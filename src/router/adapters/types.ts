/**
 * What one /v1 model endpoint is to the request pipeline (../endpoint.ts, ../pipeline.ts): a plain
 * data object. The pipeline owns everything the endpoints share (identity, limits, credits,
 * failover, relaying, settlement, the request record); an adapter says only what differs: how the
 * request is read and checked, what each target is sent and where, where the answer's usage is,
 * what a call may cost before it runs, how its errors look, and what kind of answer it relays.
 * A translating endpoint (one API's shape in, chat completions upstream) is an adapter whose
 * check translates (keeping what it needs per call, keyed by the body), whose payload builds the
 * chat body, whose upstreamPath is chat's, and whose transformWhole, rewriteEvents and renderError
 * speak its API.
 * Such an endpoint may also have a native form (NativeForm): a target whose upstream lists the
 * endpoint in its `native` config is sent the API's own request instead, and its answer relayed.
 */
import type { EndpointName } from "../../config/schema";
import type { Reserve } from "../../credits/reservation";
import type { GatewayError } from "../../errors";
import type { Identity } from "../../auth/types";
import type { StreamDialect, StreamRewrite } from "../sse-events";
import type { ModelRoute, Target } from "../registry";
import type { Usage } from "../../credits/cost";

/** A request body the adapter has checked: an object naming a model. */
export type CallBody = { model: string } & Record<string, unknown>;

/**
 * completion: JSON, or an event stream when the body says `stream: true` (usage in the JSON or
 * in the stream's usage chunk, which the gateway asks for and strips when the client did not);
 * whole: one answer read whole and relayed with its own type (JSON, or text for some transcription
 * formats); bytes: relayed as it arrives (audio), never held whole.
 */
type AnswerKind = "completion" | "whole" | "bytes";

export interface EstimateInput {
  body: CallBody;
  bodyBytes: number;
  defaultMaxTokens: number;
  /** The completion as the pipeline counted it: a stream's events, or a whole answer's characters / 4. */
  completionTokens: number;
}

/**
 * How an endpoint is sent to a target whose upstream serves its API itself (`native = [name]` in
 * the upstream's config): passed through, not translated. The pipeline chooses per target, so a
 * route may mix native and translated targets and fail over between them.
 */
export interface NativeForm {
  /** Under each such upstream's base_url. */
  readonly upstreamPath: string;
  /** The JSON the target is sent: the client's request naming `target.model`, with a priced completion's `tokenLimit`. */
  payload(body: CallBody, target: Target, tokenLimit: number | null): Record<string, unknown>;
  /** The usage a whole answer reports; null when it reports none. */
  usage(text: string): Usage | null;
  /** How the relay reads the API's own event stream (../sse.ts). */
  readonly stream: StreamDialect;
  /** Headers of the client's request sent on to the target when present (lower case: the API's version and feature flags). */
  readonly passHeaders?: readonly string[];
}

export interface EndpointAdapter {
  readonly name: EndpointName;
  /** The paths clients call (the first is the documented one). */
  readonly paths: readonly string[];
  /** Under each upstream's base_url. */
  readonly upstreamPath: string;
  /** json: a JSON object checked by `check`; multipart: an upload streamed through, its `model` field read on the way (../upload.ts). */
  readonly input: "json" | "multipart";
  readonly answer: AnswerKind;
  /** Throws the GatewayError (400) for a JSON body this endpoint refuses. */
  check(body: unknown): asserts body is CallBody;
  /** Refusals that depend on the route the model names (a limit no reservation covers); a promise when it reads the database (Postgres). */
  checkRoute?(body: CallBody, route: ModelRoute): void | Promise<void>;
  /** The endpoint's native form, for targets whose upstream serves its API itself. */
  readonly native?: NativeForm;
  /**
   * Called once the call is admitted, before any target is sent anything: throws the GatewayError
   * of a refusal that depends on who calls (nothing is charged for it). What it keeps per call is
   * keyed by the body, as with check.
   */
  admitted?(body: CallBody, identity: Identity): void | Promise<void>;
  /**
   * The JSON one target is sent, naming its model (`target.model`): the body amended in place, or
   * a translation of it (then the client's body keeps the model the client named, and a streamed
   * one is asked for its usage by the pipeline). `tokenLimit`: a priced completion's limit, for the
   * target's token_limit_field. Absent: the body as it came, with the target's model.
   */
  payload?(body: CallBody, target: Target, tokenLimit: number | null): Record<string, unknown>;
  /** The usage an answer reports (a whole answer's text); null when it reports none. */
  usage(text: string): Usage | null;
  /** What a successful answer that reported no usage is charged. */
  estimate(input: EstimateInput): Usage;
  /**
   * What a call holds of the credits available before it runs (and, from an unlimited amount, what
   * a SpendAuth amount must cover): ../../credits/reservation.ts.
   */
  reserve: Reserve;
  /** The error answer in this API's shape; OpenAI's when absent. */
  renderError?(error: GatewayError, headers: Record<string, string>): Response;
  /**
   * A whole (JSON) answer of success, rewritten for the client (a translation back); `body` is the
   * client's, whose identity can key what the adapter kept of it when it checked it (a WeakMap);
   * `target` the one that answered (whether it was sent the native form: servesNatively).
   */
  transformWhole?(text: string, body: CallBody, target: Target): string | Promise<string>;
  /**
   * The rewriter of an event stream of success for the client, given the complete events as the
   * relay sends them, after their usage is read (../sse-events.ts StreamRewrite), in the relay's own
   * pull. `body` and `target` as for transformWhole; null sends the events as they are.
   */
  rewriteEvents?(body: CallBody, target: Target): StreamRewrite | null;
  /** The stream's usage chunk is kept whether or not the client asked for it (a translator reads it). */
  readonly keepUsageChunk?: boolean;
  /** An upstream's refusal (status 400 and up), rewritten for the client in this API's error shape; relayed as it came when absent. */
  transformError?(text: string, status: number): string;
  /**
   * The answer the gateway gives itself, without an upstream, when some target of the route does
   * not serve the API natively (an estimate it can make); charged nothing.
   */
  answerLocally?(body: CallBody): string;
}

/** Whether `target` is sent the adapter's native form: the adapter has one, and the target's upstream lists the endpoint as native. */
export function servesNatively(adapter: EndpointAdapter, target: Target): boolean {
  return adapter.native !== undefined && (target.upstream.config.native as readonly string[]).includes(adapter.name);
}
