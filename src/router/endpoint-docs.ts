/**
 * The OpenAPI operations of the /v1 model endpoints: one per adapter (./adapters/index.ts), each
 * with its request schema, an example that works as it is in Swagger UI's "Try it out" (a
 * configured model that serves it, a free one first), and the responses every endpoint shares.
 */
import type { OpenAPIV3 } from "openapi-types";
import type { AppDeps } from "../deps";
import type { EndpointName } from "../config/schema";
import { errorDoc } from "../swagger";
import { ChatCompletionRequest } from "./schema";
import { CompletionRequest } from "./adapters/completions";
import { EmbeddingRequest, RerankRequest } from "./adapters/embeddings";
import { SpeechRequest } from "./adapters/audio";
import { ResponsesRequest } from "./adapters/responses";
import { CountTokensRequest, MessagesRequest } from "./adapters/messages-schema";

const RATE_LIMIT_HEADERS: Record<string, OpenAPIV3.HeaderObject> = {
  "x-ratelimit-limit-requests": { description: "The caller's limit (per minute, or per day when that binds)", schema: { type: "integer" } },
  "x-ratelimit-remaining-requests": { description: "Requests left under it", schema: { type: "integer" } },
  "x-ratelimit-reset-requests": { description: "Time until it is full again (`1s`, `6m0s`)", schema: { type: "string" } },
  "x-request-id": { description: "This request's id, as in the request log", schema: { type: "string" } },
};

const withLimits = (doc: OpenAPIV3.ResponseObject): OpenAPIV3.ResponseObject => ({ ...doc, headers: RATE_LIMIT_HEADERS });

const SUCCESS_HEADERS: Record<string, OpenAPIV3.HeaderObject> = {
  ...RATE_LIMIT_HEADERS,
  "x-gateway-overhead-ms": {
    description: "The gateway's own time for this request until the answer's headers, in ms (upstream waits excluded)",
    schema: { type: "string", example: "0.12" },
  },
};

/** A 200 with the gateway's headers, its body of each type in `content`. */
function success(description: string, content: OpenAPIV3.ResponseObject["content"]): OpenAPIV3.ResponseObject {
  return { description, content, headers: SUCCESS_HEADERS };
}

const ANY_JSON: OpenAPIV3.MediaTypeObject = { schema: { type: "object", additionalProperties: true } };

/** The interface's responses for createChatCompletion (its Errors table), and the others the gateway sends; every model endpoint answers them. */
const CALL_ERRORS: OpenAPIV3.ResponsesObject = {
  400: errorDoc("The body is not JSON (or not multipart, for an upload) or does not match the schema, or the model does not serve this endpoint"),
  401: errorDoc("Missing or invalid API key, session or SpendAuth payment, or a non-free model without credentials"),
  402: withLimits(
    errorDoc(
      "Payment required: the balance is zero on a non-free model (insufficient_credits), the SpendAuth account's on-chain balance does not cover the amount (insufficient_balance), or the SpendAuth amount is too low (payment_required, answered before the limiter: without the x-ratelimit-* headers)",
    ),
  ),
  403: errorDoc("Sent from a page of another origin that server.cors_origins does not list, or with a session cookie from another origin"),
  404: errorDoc("No model of that name"),
  413: errorDoc("The body (or upload) is larger than server.max_body_bytes"),
  429: {
    ...errorDoc("Rate limit exceeded; Retry-After says when to try again"),
    headers: { ...RATE_LIMIT_HEADERS, "retry-after": { description: "Seconds until a request would be allowed", schema: { type: "integer" } } },
  },
  502: errorDoc("Every upstream failed"),
  503: errorDoc(
    "Every upstream of the model is cooling down, paid models are paused while the database refuses to record credits, or the bodies being read at once reached server.max_body_bytes_in_flight; Retry-After says when to try again",
  ),
  504: errorDoc("The upstream sent no headers within first_byte_timeout_ms"),
};

export interface EndpointDoc {
  name: EndpointName;
  path: string;
  detail: OpenAPIV3.OperationObject | { hide: true };
}

const SECURITY: OpenAPIV3.SecurityRequirementObject[] = [{ bearer: [] }, { session: [] }, { spendAuth: [] }, {}];

/** A configured model that serves `endpoint` (a free one first, which needs no key), for the examples. */
function exampleModel(deps: AppDeps, endpoint: EndpointName): string {
  const models = deps.config.models.filter((m) => m.endpoints.includes(endpoint));
  return (models.find((m) => m.free) ?? models[0])?.id ?? "a model id from GET /v1/models";
}

function jsonBody(schema: unknown, example: Record<string, unknown>): OpenAPIV3.RequestBodyObject {
  return { required: true, content: { "application/json": { schema: schema as OpenAPIV3.SchemaObject, example } } };
}

function uploadBody(model: string, verb: string): OpenAPIV3.RequestBodyObject {
  const schema: OpenAPIV3.SchemaObject = {
    type: "object",
    required: ["file", "model"],
    properties: {
      file: { type: "string", format: "binary", description: `The audio to ${verb} (wav, mp3, flac, ogg, webm, m4a), streamed through to the upstream` },
      model: { type: "string", default: model, description: "Model route identifier (GET /v1/models)" },
      response_format: { type: "string", description: "json (the default), text, srt, verbose_json or vtt" },
    },
  };
  return { required: true, content: { "multipart/form-data": { schema } } };
}

function operation(
  name: EndpointName,
  operationId: string,
  summary: string,
  requestBody: OpenAPIV3.RequestBodyObject,
  ok: OpenAPIV3.ResponseObject,
): OpenAPIV3.OperationObject {
  const security = name === "messages" ? [{ anthropicKey: [] }, ...SECURITY] : SECURITY;
  return { operationId, summary, tags: [name === "chat" ? "chat" : name], security, requestBody, responses: { 200: ok, ...CALL_ERRORS } };
}

export function endpointDocs(deps: AppDeps): EndpointDoc[] {
  const model = (name: EndpointName): string => exampleModel(deps, name);
  const jsonOrStream = (what: string) =>
    success(`${what}: a JSON object, or an event stream (data: lines, ending in data: [DONE]) with stream: true`, {
      "application/json": ANY_JSON,
      "text/event-stream": { schema: { type: "string" } },
    });
  const docs: EndpointDoc[] = [
    {
      name: "chat",
      path: "/v1/chat/completions",
      detail: operation(
        "chat",
        "createChatCompletion",
        "Create a chat completion (JSON, or an event stream with stream: true)",
        jsonBody(ChatCompletionRequest, { model: model("chat"), messages: [{ role: "user", content: "Say hello in five words." }], max_tokens: 32 }),
        jsonOrStream("The completion"),
      ),
    },
    {
      name: "completions",
      path: "/v1/completions",
      detail: operation(
        "completions",
        "createCompletion",
        "Create a text completion (legacy; `suffix` for fill-in-the-middle is passed through)",
        jsonBody(CompletionRequest, { model: model("completions"), prompt: "Once upon a time", max_tokens: 16 }),
        jsonOrStream("The completion"),
      ),
    },
    {
      name: "embeddings",
      path: "/v1/embeddings",
      detail: operation(
        "embeddings",
        "createEmbedding",
        "Create embeddings (the body is passed through untouched; usage.prompt_tokens is metered)",
        jsonBody(EmbeddingRequest, { model: model("embeddings"), input: ["The quick brown fox", "jumps over the lazy dog"] }),
        success("The embeddings, as the upstream sent them", { "application/json": ANY_JSON }),
      ),
    },
    {
      name: "rerank",
      path: "/v1/rerank",
      detail: operation(
        "rerank",
        "createRerank",
        "Rank documents by relevance to a query (Jina/Cohere shape, as llama.cpp and vLLM serve it; also at /rerank)",
        jsonBody(RerankRequest, {
          model: model("rerank"),
          query: "What is a panda?",
          documents: ["hi", "The giant panda is a bear native to China."],
          top_n: 2,
        }),
        success("The results, as the upstream sent them", { "application/json": ANY_JSON }),
      ),
    },
    { name: "rerank", path: "/rerank", detail: { hide: true } },
    {
      name: "transcriptions",
      path: "/v1/audio/transcriptions",
      detail: operation(
        "transcriptions",
        "createTranscription",
        "Transcribe audio (a multipart upload, streamed through; charged price.request per call)",
        uploadBody(model("transcriptions"), "transcribe"),
        success("The transcription: JSON, or text for the text, srt and vtt formats", {
          "application/json": ANY_JSON,
          "text/plain": { schema: { type: "string" } },
        }),
      ),
    },
    {
      name: "translations",
      path: "/v1/audio/translations",
      detail: operation(
        "translations",
        "createTranslation",
        "Translate audio into English text (a multipart upload, streamed through; charged price.request per call)",
        uploadBody(model("translations"), "translate"),
        success("The translation: JSON, or text for the text, srt and vtt formats", {
          "application/json": ANY_JSON,
          "text/plain": { schema: { type: "string" } },
        }),
      ),
    },
    {
      name: "speech",
      path: "/v1/audio/speech",
      detail: operation(
        "speech",
        "createSpeech",
        "Generate speech from text (the audio is streamed back as it comes; charged price.request per call)",
        jsonBody(SpeechRequest, { model: model("speech"), input: "Hello from modelgate.", voice: "alloy" }),
        success("The audio, in the upstream's type (audio/mpeg for the default mp3)", {
          "audio/mpeg": { schema: { type: "string", format: "binary" } },
          "application/octet-stream": { schema: { type: "string", format: "binary" } },
        }),
      ),
    },
    {
      name: "messages",
      path: "/v1/messages",
      detail: operation(
        "messages",
        "createMessage",
        "Create a message, Anthropic's Messages API (native where the upstream serves it, else translated to chat; errors in Anthropic's shape)",
        jsonBody(MessagesRequest, { model: model("messages"), max_tokens: 32, messages: [{ role: "user", content: "Say hello in five words." }] }),
        success("The message: a JSON object, or an event stream (event: and data: lines, ending with message_stop) with stream: true", {
          "application/json": ANY_JSON,
          "text/event-stream": { schema: { type: "string" } },
        }),
      ),
    },
    {
      name: "messages",
      path: "/v1/messages/count_tokens",
      detail: operation(
        "messages",
        "countMessageTokens",
        "Count a message's input tokens: the upstream's count where every target serves Messages, else the gateway's estimate; charged nothing",
        jsonBody(CountTokensRequest, { model: model("messages"), messages: [{ role: "user", content: "Say hello in five words." }] }),
        success("The count", { "application/json": { schema: { type: "object", properties: { input_tokens: { type: "integer" } } } } }),
      ),
    },
    {
      name: "responses",
      path: "/v1/responses",
      detail: operation(
        "responses",
        "createResponse",
        "Create a model response (OpenAI's Responses API): passed through to upstreams that serve it, translated to chat completions for the rest",
        jsonBody(ResponsesRequest, { model: model("responses"), input: "Say hello in five words.", max_output_tokens: 32 }),
        success("The Response object, or its event stream (event: and data: lines, ending in response.completed) with stream: true", {
          "application/json": ANY_JSON,
          "text/event-stream": { schema: { type: "string" } },
        }),
      ),
    },
  ];
  return docs;
}
