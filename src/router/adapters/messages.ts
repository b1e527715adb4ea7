/**
 * POST /v1/messages and POST /v1/messages/count_tokens, Anthropic's Messages API, on every model
 * route. A target whose upstream lists "messages" in `native` is sent the body as it came (its
 * model and, on a priced route, the reserved max_tokens set) at base_url + /messages, with the
 * client's anthropic-version and anthropic-beta headers, and its answer relayed as it came, usage
 * read from Anthropic's fields. Any other target gets the request translated to chat completions
 * (../../translate/anthropic-request.ts) and its answer translated back, whole or streamed
 * (./messages-stream.ts). A route with any translated target refuses, before anything is charged,
 * a request that cannot be translated (a server tool, an unknown block), so no failover can meet
 * it halfway. Errors, the gateway's own and an upstream's refusals, are in Anthropic's shape.
 * count_tokens is asked of the upstream when every target serves Messages natively; otherwise it
 * is the documented estimate (../../translate/count-tokens.ts), answered by the gateway. It is
 * admitted like any call (identity, key policy, rate limits) and charged nothing.
 */
import { messagesToChat, type MessagesTranslation } from "../../translate/anthropic-request";
import { chatToMessage } from "../../translate/anthropic-answer";
import { estimateInputTokens } from "../../translate/count-tokens";
import { reserveWithin } from "../../credits/reservation";
import { setTokenLimit } from "../attempt-body";
import { usageFromJson, type Usage } from "../../credits/cost";
import { estimatedCompletion } from "./chat";
import { anthropicErrorText, anthropicUsageFromJson, checkMessagesBody, invalid, MESSAGES_EVENTS, renderAnthropicError } from "./anthropic-wire";
import { messagesFromChatEvents } from "./messages-stream";
import type { ModelRoute } from "../registry";
import { servesNatively, type CallBody, type EndpointAdapter, type NativeForm } from "./types";

/** The chat translation of a body, made once by checkRoute (a symbol: never serialised). */
const TRANSLATION = Symbol("chat translation");
/** count_tokens' estimate, made once by checkRoute. */
const ESTIMATE = Symbol("input token estimate");
/** What an Anthropic client says of the API version and the beta features its body uses; a native upstream needs them to read it. */
const ANTHROPIC_HEADERS = ["anthropic-version", "anthropic-beta"];

type Kept = CallBody & { [TRANSLATION]?: Extract<MessagesTranslation, { chat: unknown }>; [ESTIMATE]?: number };

function allNative(adapter: EndpointAdapter, route: ModelRoute): boolean {
  return route.targets.every((target) => servesNatively(adapter, target));
}

function stopSequences(body: CallBody): readonly string[] {
  return (body as Kept)[TRANSLATION]?.stopSequences ?? [];
}

const nativeMessages: NativeForm = {
  upstreamPath: "messages",
  payload(body, target, tokenLimit) {
    const sent: Record<string, unknown> = { ...body, model: target.model };
    if (tokenLimit !== null) sent.max_tokens = tokenLimit;
    return sent;
  },
  usage: anthropicUsageFromJson,
  stream: MESSAGES_EVENTS,
  passHeaders: ANTHROPIC_HEADERS,
};

export const messagesAdapter: EndpointAdapter = {
  name: "messages",
  paths: ["/v1/messages"],
  upstreamPath: "chat/completions",
  input: "json",
  answer: "completion",
  check: (body) => checkMessagesBody(body, { maxTokens: "required" }),
  checkRoute(body, route) {
    if (allNative(messagesAdapter, route)) return;
    const translated = messagesToChat(body);
    if ("error" in translated) throw invalid(translated.error.message, null);
    (body as Kept)[TRANSLATION] = translated;
  },
  native: nativeMessages,
  payload(body, target, tokenLimit) {
    const sent: Record<string, unknown> = { ...(body as Kept)[TRANSLATION]!.chat, model: target.model };
    if (tokenLimit !== null) setTokenLimit(sent, target.upstream.config.token_limit_field, tokenLimit);
    return sent;
  },
  usage: usageFromJson,
  estimate: estimatedCompletion,
  reserve: reserveWithin,
  renderError: renderAnthropicError,
  transformWhole(text, body, target) {
    if (servesNatively(messagesAdapter, target)) return text;
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch {
      return anthropicErrorText(text, 502);
    }
    return JSON.stringify(chatToMessage(answer as Record<string, unknown>, { model: body.model, stopSequences: stopSequences(body) }));
  },
  rewriteEvents: (body, target) =>
    servesNatively(messagesAdapter, target) ? null : messagesFromChatEvents({ model: body.model, stopSequences: stopSequences(body) }),
  // The translation reads the chat stream's usage chunk.
  keepUsageChunk: true,
  transformError: anthropicErrorText,
};

const NOTHING: Usage = { prompt_tokens: 0, completion_tokens: 0 };

export const countTokensAdapter: EndpointAdapter = {
  name: "messages",
  paths: ["/v1/messages/count_tokens"],
  upstreamPath: "messages/count_tokens",
  input: "json",
  answer: "whole",
  check: (body) => checkMessagesBody(body, { maxTokens: "optional" }),
  checkRoute(body, route) {
    if (allNative(countTokensAdapter, route)) return;
    const estimate = estimateInputTokens(body);
    if ("error" in estimate) throw invalid(estimate.error.message, null);
    (body as Kept)[ESTIMATE] = estimate.input_tokens;
  },
  native: {
    upstreamPath: "messages/count_tokens",
    payload: (body, target) => ({ ...body, model: target.model }),
    usage: () => NOTHING,
    stream: MESSAGES_EVENTS,
    passHeaders: ANTHROPIC_HEADERS,
  },
  usage: () => NOTHING,
  estimate: () => NOTHING,
  reserve: () => ({ micro: 0, completionLimit: null }),
  renderError: renderAnthropicError,
  transformError: anthropicErrorText,
  answerLocally: (body) => JSON.stringify({ input_tokens: (body as Kept)[ESTIMATE] ?? 0 }),
};
