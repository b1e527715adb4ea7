/**
 * POST /v1/responses, OpenAI's Responses API (Codex CLI, the Agents SDK): passed through to a
 * target whose upstream serves it (./responses-native.ts), translated to chat completions and back
 * for every other (src/translate/responses-*.ts, ./responses-translated.ts). What it keeps per
 * call (the translation, the stored conversation it continues, who keeps the answer) is keyed by
 * the client's body.
 *
 * A request that cannot be translated (a hosted tool such as web_search, an unknown item type) is
 * refused with a 400 naming the field when the route has any target that would need the
 * translation; a route whose targets all serve Responses takes it as it is.
 *
 * `store` (true unless false): the answer is kept for its caller (../response-store.ts), then
 * found by previous_response_id and GET /v1/responses/{id}; an anonymous caller keeps nothing,
 * and its previous_response_id is refused. Another caller's id, or an unknown one, is a 404.
 */
import { Type as t } from "@sinclair/typebox";
import type { AppDeps } from "../../deps";
import { GatewayError } from "../../errors";
import { reserveWithin } from "../../credits/reservation";
import { responsesToChat, type ResponseEcho } from "../../translate/responses-request";
import { chatToResponse } from "../../translate/responses-answer";
import type { ChatRequest } from "../../translate/chat";
import { usageFromJson } from "../../credits/cost";
import { createResponseStore, responseOwner } from "../response-store";
import type { ModelRoute } from "../registry";
import { completionPayload, estimatedCompletion } from "./chat";
import { inputItems, nativeEvents, nativeResponses } from "./responses-native";
import { translatedEvents } from "./responses-translated";
import { servesNatively, type CallBody, type EndpointAdapter } from "./types";

/** The request as the OpenAPI document describes it; the translator (or a native upstream) checks the rest. */
export const ResponsesRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    input: t.Optional(
      t.Union([t.String(), t.Array(t.Unknown())], { description: "A string, or items: messages, function_call, function_call_output, reasoning" }),
    ),
    instructions: t.Optional(t.String()),
    previous_response_id: t.Optional(t.String({ description: "A stored response of the same caller to continue" })),
    store: t.Optional(t.Boolean({ description: "Keep the response for previous_response_id and GET /v1/responses/{id} (default true)" })),
    stream: t.Optional(t.Boolean()),
    tools: t.Optional(t.Array(t.Unknown(), { description: "Function tools (hosted tools only on upstreams that serve Responses)" })),
    max_output_tokens: t.Optional(t.Integer({ minimum: 1 })),
  },
  { additionalProperties: true },
);

interface ResponsesCall {
  /** The chat request for translated targets; null on a route whose targets all serve Responses. */
  translation: { chat: ChatRequest; echo: ResponseEcho } | null;
  /** The stored conversation previous_response_id names (its size counted in the reservation before it is read). */
  priorBytes: number;
  prior: unknown[];
  /** Who keeps the answer; null when nothing is kept (store false, an anonymous caller). */
  owner: string | null;
  /** The id of a translated answer (a native one keeps the upstream's). */
  id: string;
}

/** Stands for a stored conversation while a request that continues one is checked before it is read. */
const PRIOR_PLACEHOLDER = [{ type: "message", role: "user", content: "" }];

export function createResponsesAdapter(deps: AppDeps): EndpointAdapter {
  const store = createResponseStore(deps.db, { maxBytes: deps.config.server.response_store_max_bytes, now: deps.now });
  const calls = new WeakMap<CallBody, ResponsesCall>();
  const callOf = (body: CallBody): ResponsesCall => calls.get(body)!;
  const needsTranslation = (route: ModelRoute): boolean => route.targets.some((target) => !servesNatively(adapter, target));

  /** Keeps an answer for its caller: the conversation so far as items, and the Response object; never rejects. */
  const keep = (body: CallBody, response: Record<string, unknown>): boolean | Promise<boolean> => {
    const call = callOf(body);
    if (call.owner === null || typeof response.id !== "string") return false;
    const output = Array.isArray(response.output) ? response.output : [];
    return store.put({ id: response.id, owner: call.owner, items: [...call.prior, ...inputItems(body.input), ...output], response });
  };

  /** Continues the stored conversation `previous` names (found by admitted), or refuses with a 404. */
  const continueFrom = (body: CallBody, previous: string, stored: { items: unknown[] } | null): void => {
    if (stored === null) throw new GatewayError("not_found", `No stored response with id "${previous.slice(0, 100)}"`, { param: "previous_response_id" });
    const call = callOf(body);
    call.prior = stored.items;
    if (call.translation === null) return;
    const translated = responsesToChat(body, { priorItems: stored.items });
    if ("error" in translated) throw invalid(translated.error.message, translated.error.param);
    call.translation = translated;
  };

  const adapter: EndpointAdapter = {
    name: "responses",
    paths: ["/v1/responses"],
    upstreamPath: "chat/completions",
    input: "json",
    answer: "completion",
    // The translator reads the usage chunk whether or not the client could ask for one.
    keepUsageChunk: true,
    check(body: unknown): asserts body is CallBody {
      if (typeof body !== "object" || body === null || Array.isArray(body)) throw invalid("body: must be a JSON object", null);
      const request = body as Record<string, unknown>;
      if (typeof request.model !== "string" || request.model === "") throw invalid("model: a non-empty string is required", "model");
      calls.set(body as CallBody, {
        translation: null,
        priorBytes: 0,
        prior: [],
        owner: null,
        id: `resp_${crypto.randomUUID().replaceAll("-", "")}`,
      });
      // The completion limit where the gateway's credit rules read one (a reservation, an
      // estimate); not enumerable, so no body sent upstream carries it.
      if (typeof request.max_output_tokens === "number" && !Object.hasOwn(request, "max_tokens")) {
        Object.defineProperty(request, "max_tokens", { value: request.max_output_tokens, enumerable: false, writable: true });
      }
    },
    checkRoute(body, route) {
      const call = callOf(body);
      // Translated only for a route that has a target needing it: a native route takes the request as it is.
      if (needsTranslation(route)) {
        const continues = body.previous_response_id !== undefined && body.previous_response_id !== null;
        const translated = responsesToChat(body, { priorItems: continues ? PRIOR_PLACEHOLDER : [] });
        if ("error" in translated) throw invalid(translated.error.message, translated.error.param);
        call.translation = translated;
      }
      if (typeof body.previous_response_id !== "string") return;
      const bytes = store.bytes(body.previous_response_id);
      if (typeof bytes === "number") call.priorBytes = bytes;
      else return bytes.then((n) => void (call.priorBytes = n));
    },
    admitted(body, identity) {
      const call = callOf(body);
      const owner = responseOwner(identity);
      call.owner = body.store === false ? null : owner;
      const previous = body.previous_response_id;
      if (typeof previous !== "string") return;
      if (owner === null) {
        throw new GatewayError(
          "invalid_request_error",
          "previous_response_id continues a stored response, and anonymous calls store none: call with an API key, a session or SpendAuth",
          { param: "previous_response_id" },
        );
      }
      const stored = store.get(previous, owner);
      if (stored instanceof Promise) return stored.then((found) => continueFrom(body, previous, found));
      continueFrom(body, previous, stored);
    },
    // A stored conversation the request continues is prompt too.
    reserve: (input) => {
      const priorBytes = calls.get(input.body as CallBody)?.priorBytes ?? 0;
      return reserveWithin(priorBytes === 0 ? input : { ...input, bodyBytes: input.bodyBytes + priorBytes });
    },
    payload(body, target, tokenLimit) {
      return completionPayload(callOf(body).translation!.chat as CallBody, target, tokenLimit);
    },
    native: nativeResponses((body) => callOf(body).prior),
    usage: usageFromJson,
    estimate: estimatedCompletion,
    transformWhole(text, body, target) {
      const call = callOf(body);
      if (servesNatively(adapter, target)) {
        // Committed before the answer goes out: the client may continue it at once.
        const kept = call.owner === null ? false : keepNative(text, (response) => keep(body, response));
        return typeof kept === "boolean" ? text : kept.then(() => text);
      }
      const answer = chatToResponse(JSON.parse(text) as Record<string, unknown>, { model: body.model, echo: call.translation!.echo, id: call.id });
      // The answer says whether it was kept: not for an anonymous caller, nor one over the size bound.
      const kept = keep(body, answer as unknown as Record<string, unknown>);
      if (typeof kept !== "boolean") return kept.then((stored) => JSON.stringify({ ...answer, store: stored }));
      answer.store = kept;
      return JSON.stringify(answer);
    },
    rewriteEvents(body, target) {
      const call = callOf(body);
      if (servesNatively(adapter, target)) return nativeEvents(call.owner === null ? null : (response) => void keep(body, response));
      return translatedEvents({
        model: body.model,
        id: call.id,
        echo: { ...call.translation!.echo, store: call.owner !== null },
        onCompleted: (response) => void keep(body, response as unknown as Record<string, unknown>),
      });
    },
  };
  return adapter;
}

/** A native answer's Response object, for `store`; an answer that is not one is not kept. */
function keepNative(text: string, keep: (response: Record<string, unknown>) => boolean | Promise<boolean>): boolean | Promise<boolean> {
  let response: unknown;
  try {
    response = JSON.parse(text);
  } catch {
    return false;
  }
  if (typeof response === "object" && response !== null && !Array.isArray(response)) return keep(response as Record<string, unknown>);
  return false;
}

function invalid(message: string, param: string | null): GatewayError {
  return new GatewayError("invalid_request_error", `Invalid request body: ${message}`, { param });
}
