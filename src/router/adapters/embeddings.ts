/**
 * POST /v1/embeddings and POST /v1/rerank (also /rerank, where llama.cpp and Jina serve it): the
 * body passed through as the client sent it but for the target's model name; no field is added or
 * defaulted (vLLM refuses `encoding_format: null`). Metered on the prompt tokens the answer
 * reports at price.prompt; reserved on the body's size, as chat's prompt is.
 */
import { Type as t } from "@sinclair/typebox";
import { promptTokenEstimate } from "../../credits/price";
import { readUsage, tokensCostMicro, usageFromJson, type Usage } from "../../credits/cost";
import { jsonChecker } from "./check";
import type { EndpointAdapter, EstimateInput } from "./types";
import { reserveFixed, type ReserveInput } from "../../credits/reservation";

const Model = t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" });

export const EmbeddingRequest = t.Object(
  {
    model: Model,
    input: t.Union([t.String(), t.Array(t.Unknown(), { minItems: 1 })], { description: "A string, an array of strings, or token ids" }),
  },
  { additionalProperties: true },
);

export const RerankRequest = t.Object(
  {
    model: Model,
    query: t.String(),
    documents: t.Array(t.Unknown(), { minItems: 1 }),
    top_n: t.Optional(t.Union([t.Integer({ minimum: 1 }), t.Null()])),
  },
  { additionalProperties: true },
);

function promptOnlyEstimate(input: EstimateInput): Usage {
  return { prompt_tokens: promptTokenEstimate(input.bodyBytes), completion_tokens: 0 };
}

function reservePrompt(input: ReserveInput) {
  return reserveFixed(tokensCostMicro(promptTokenEstimate(input.bodyBytes), 0, input.price), input.availableMicro);
}

/**
 * The input tokens an answer reports: `prompt_tokens` (OpenAI's embeddings, llama.cpp's rerank), or
 * `total_tokens` where that is all there is (vLLM's and Jina's rerank), all of it input.
 */
function promptUsage(text: string): Usage | null {
  return usageFromJson(text, (raw) => {
    const { prompt_tokens, total_tokens } = (raw ?? {}) as Record<string, unknown>;
    return readUsage({ prompt_tokens: prompt_tokens ?? total_tokens, completion_tokens: 0 });
  });
}

export const embeddingsAdapter: EndpointAdapter = {
  name: "embeddings",
  paths: ["/v1/embeddings"],
  upstreamPath: "embeddings",
  input: "json",
  answer: "whole",
  check: jsonChecker(EmbeddingRequest),
  usage: promptUsage,
  estimate: promptOnlyEstimate,
  reserve: reservePrompt,
};

export const rerankAdapter: EndpointAdapter = {
  name: "rerank",
  paths: ["/v1/rerank", "/rerank"],
  upstreamPath: "rerank",
  input: "json",
  answer: "whole",
  check: jsonChecker(RerankRequest),
  usage: promptUsage,
  estimate: promptOnlyEstimate,
  reserve: reservePrompt,
};
