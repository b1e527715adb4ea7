/**
 * POST /v1/chat/completions: the interface's schema (./../schema.ts), messages with content, a
 * completion limit a priced route can reserve for, and the `developer` role (OpenAI's current name
 * for system, which the AI SDK and LangChain send) sent to each target as its upstream takes it.
 */
import { TypeCompiler } from "@sinclair/typebox/compiler";
import { GatewayError } from "../../errors";
import { violationError } from "../../validation";
import { completionBound, promptTokenEstimate } from "../../credits/price";
import { reserveWithin } from "../../credits/reservation";
import { ChatCompletionRequest, contentMissing } from "../schema";
import { setTokenLimit } from "../attempt-body";
import { usageFromJson } from "../../credits/cost";
import type { ModelRoute, Target } from "../registry";
import type { CallBody, EndpointAdapter, EstimateInput } from "./types";
import type { Usage } from "../../credits/cost";

const checker = TypeCompiler.Compile(ChatCompletionRequest);
/** Marks a message the client sent as `developer` (a symbol: never serialised), so each target gets its own role for it. */
const DEVELOPER = Symbol("developer");

/** A route whose completions are charged: its requests' reservations (credits, or a SpendAuth amount) assume a completion limit. */
export function completionsPriced(route: ModelRoute): boolean {
  return !route.free && route.price.completion > 0;
}

/** llama.cpp's n_predict -1 sets no limit: no reservation covers it on a route that charges for completions. */
export function checkCompletionLimit(body: CallBody, route: ModelRoute): void {
  if (body.n_predict === -1 && completionsPriced(route)) {
    throw new GatewayError("invalid_request_error", `n_predict -1 sets no limit, and "${route.id}" charges for completions: send a limit of at least 0`, {
      param: "n_predict",
    });
  }
}

/** The JSON a completion target is sent: its model, and a priced request's limit in the field its upstream reads. */
export function completionPayload(body: CallBody, target: Target, tokenLimit: number | null): CallBody {
  body.model = target.model;
  if (tokenLimit != null) setTokenLimit(body, target.upstream.config.token_limit_field, tokenLimit);
  return body;
}

/**
 * What an answer the upstream reported no usage for consumed, estimated: the prompt as the
 * reservation estimates it, and the completion as counted by the pipeline, at most the completion
 * limit sent.
 */
export function estimatedCompletion(input: EstimateInput): Usage {
  return {
    prompt_tokens: promptTokenEstimate(input.bodyBytes),
    completion_tokens: Math.min(input.completionTokens, completionBound(input.body, input.defaultMaxTokens)),
  };
}

export const chatAdapter: EndpointAdapter = {
  name: "chat",
  paths: ["/v1/chat/completions"],
  upstreamPath: "chat/completions",
  input: "json",
  answer: "completion",
  check(body: unknown): asserts body is CallBody {
    if (!checker.Check(body)) throw violationError(checker.Errors(body).First());
    const missing = contentMissing(body.messages);
    if (missing !== -1) {
      const param = `messages[${missing}].content`;
      throw new GatewayError(
        "invalid_request_error",
        `Invalid request body: ${param}: required (a string or an array; null only on an assistant message with tool_calls)`,
        { param },
      );
    }
    const messages = body.messages as Array<Record<string | symbol, unknown>>;
    for (let i = 0; i < messages.length; i++)
      if (messages[i].role === "developer") (body as Record<symbol, unknown>)[DEVELOPER] = messages[i][DEVELOPER] = true;
  },
  checkRoute: checkCompletionLimit,
  payload(body, target, tokenLimit) {
    if ((body as Record<symbol, unknown>)[DEVELOPER] === true) {
      const role = target.upstream.config.developer_role;
      for (const message of body.messages as Array<Record<string | symbol, unknown>>) if (message[DEVELOPER] === true) message.role = role;
    }
    return completionPayload(body, target, tokenLimit);
  },
  usage: usageFromJson,
  estimate: estimatedCompletion,
  reserve: reserveWithin,
};
