/**
 * POST /v1/completions, OpenAI's legacy text completions: `prompt`, and `suffix` passed through
 * for fill-in-the-middle. Metered and relayed as chat is (JSON or an event stream, whose usage
 * chunk the gateway asks for and strips when the client did not); `best_of` candidates are
 * generated and charged, so the reservation counts them.
 */
import { Type as t } from "@sinclair/typebox";
import { reserveWithin } from "../../credits/reservation";
import { usageFromJson } from "../../credits/cost";
import { checkCompletionLimit, completionPayload, estimatedCompletion } from "./chat";
import { jsonChecker } from "./check";
import type { EndpointAdapter } from "./types";

const Limit = t.Optional(t.Union([t.Integer({ minimum: 0 }), t.Null()]));

export const CompletionRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    prompt: t.Union([t.String(), t.Array(t.Unknown(), { minItems: 1 })], { description: "A string, an array of strings, or token ids" }),
    suffix: t.Optional(t.Union([t.String(), t.Null()], { description: "Text after the completion (fill-in-the-middle), passed through" })),
    stream: t.Optional(t.Union([t.Boolean(), t.Null()])),
    max_tokens: Limit,
    n: t.Optional(t.Union([t.Integer({ minimum: 1, maximum: 128 }), t.Null()])),
    best_of: t.Optional(t.Union([t.Integer({ minimum: 1, maximum: 128 }), t.Null()])),
    n_predict: t.Optional(t.Union([t.Integer({ minimum: -1 }), t.Null()])),
    stream_options: t.Optional(t.Union([t.Object({}, { additionalProperties: true }), t.Null()])),
  },
  { additionalProperties: true },
);

export const completionsAdapter: EndpointAdapter = {
  name: "completions",
  paths: ["/v1/completions"],
  upstreamPath: "completions",
  input: "json",
  answer: "completion",
  check: jsonChecker(CompletionRequest),
  checkRoute: checkCompletionLimit,
  payload: completionPayload,
  usage: usageFromJson,
  estimate: estimatedCompletion,
  reserve(input) {
    const { n, best_of } = input.body;
    // best_of candidates are generated (and charged) though only n come back.
    const choices = typeof best_of === "number" && best_of > (typeof n === "number" ? n : 1) ? best_of : n;
    return reserveWithin(choices === n ? input : { ...input, body: { ...input.body, n: choices } });
  },
};
