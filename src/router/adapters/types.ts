/**
 * What one /v1 model endpoint is to the request pipeline (../endpoint.ts, ../pipeline.ts): a plain
 * data object. The pipeline owns everything the endpoints share (identity, limits, credits,
 * failover, relaying, settlement, the request record); an adapter says only what differs: how the
 * request is read and checked, what each target is sent and where, where the answer's usage is,
 * what a call may cost before it runs, how its errors look, and what kind of answer it relays.
 * A translating endpoint (one API's shape in, chat completions upstream) is an adapter whose
 * check translates (keeping what it needs per call on the body, which the transforms are given),
 * whose payload builds the chat body, whose upstreamPath is chat's, and whose transforms and
 * renderError speak its API. Its `native` wire is used instead for a target whose upstream serves
 * that API itself (`native = [...]` names the adapter): the body passed through, the answer read
 * in the API's own terms (usage, stream events) and relayed as it came.
 */
import type { EndpointName } from "../../config/schema";
import type { Reserve } from "../../credits/reservation";
import type { GatewayError } from "../../errors";
import type { ModelRoute, Target } from "../registry";
import type { Usage } from "../usage";
import type { EventDialect } from "../sse";

/** A request body the adapter has checked: an object naming a model. */
export type CallBody = { model: string } & Record<string, unknown>;

/**
 * completion: JSON, or an event stream when the body says `stream: true` (usage in the JSON or
 * in the stream's usage chunk, which the gateway asks for and strips when the client did not);
 * whole: one answer read whole and relayed with its own type (JSON, or text for some transcription
 * formats); bytes: relayed as it arrives (audio), never held whole.
 */
export type AnswerKind = "completion" | "whole" | "bytes";

export interface EstimateInput {
  body: CallBody;
  bodyBytes: number;
  defaultMaxTokens: number;
  /** The completion as the pipeline counted it: a stream's events, or a whole answer's characters / 4. */
  completionTokens: number;
}

/** How one target is called and its answer read: the adapter's own, or its `native` wire. */
export interface Wire {
  /** Under each upstream's base_url. */
  readonly upstreamPath: string;
  /**
   * The JSON one target is sent, naming its model (`target.model`): the body amended in place, or
   * a translation of it (then the client's body keeps the model the client named, and a streamed
   * one is asked for its usage by the pipeline). `tokenLimit`: a priced completion's limit, for the
   * target's token_limit_field. Absent: the body as it came, with the target's model.
   */
  payload?(body: CallBody, target: Target, tokenLimit: number | null): Record<string, unknown>;
  /** The usage an answer reports (a whole answer's text); null when it reports none. */
  usage(text: string): Usage | null;
  /** How an event stream's events are read when they are not chat completions' (sse.ts); absent: chat's, and a streamed request is asked for its usage chunk. */
  readonly events?: EventDialect;
  /**
   * A whole answer rewritten for the client (a translation back; `status` says whether it is one of
   * success or the upstream's refusal); `body` is the client's, which carries what the adapter
   * kept of it when it checked it.
   */
  transformWhole?(text: string, body: CallBody, status: number): string;
  /** An event stream of success, rewritten for the client, after the usage is read (`body` as for transformWhole). */
  transformStream?(stream: ReadableStream<Uint8Array>, body: CallBody): ReadableStream<Uint8Array>;
  /** The stream's usage chunk is kept whether or not the client asked for it (a translator reads it). */
  readonly keepUsageChunk?: boolean;
  /** Headers of the client's request sent on to the target when present (lower case; a native API's version and feature flags). */
  readonly passHeaders?: readonly string[];
}

export interface EndpointAdapter extends Wire {
  readonly name: EndpointName;
  /** The paths clients call (the first is the documented one). */
  readonly paths: readonly string[];
  /** json: a JSON object checked by `check`; multipart: an upload streamed through, its `model` field read on the way (../upload.ts). */
  readonly input: "json" | "multipart";
  readonly answer: AnswerKind;
  /** Throws the GatewayError (400) for a JSON body this endpoint refuses. */
  check(body: unknown): asserts body is CallBody;
  /** Refusals that depend on the route the model names (a limit no reservation covers). */
  checkRoute?(body: CallBody, route: ModelRoute): void;
  /** What a successful answer that reported no usage is charged. */
  estimate(input: EstimateInput): Usage;
  /**
   * What a call holds of the credits available before it runs (and, from an unlimited amount, what
   * a SpendAuth amount must cover): ../../credits/reservation.ts.
   */
  reserve: Reserve;
  /** The error answer in this API's shape; OpenAI's when absent. */
  renderError?(error: GatewayError, headers: Record<string, string>): Response;
  /** The wire to a target whose upstream lists this adapter's name in `native` (it serves the API itself). */
  readonly native?: Wire;
  /**
   * The answer given without any upstream, when no target of the route serves the API natively
   * (an estimate the gateway can make itself); charged nothing.
   */
  answerLocally?(body: CallBody): string;
}
