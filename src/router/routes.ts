/**
 * The model-facing controller: GET /v1/models and POST /v1/chat/completions. Handlers are thin;
 * the work happens in handleChat and the registry.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import type { ChatEndpoint } from "./endpoint";
import type { ModelRoute } from "./registry";
import { GatewayError } from "../errors";
import { requestPath } from "../request-url";
import { ChatCompletionRequest } from "./schema";
import { targetState } from "./target-state";
import { errorDoc, jsonDoc } from "../swagger";
import type { OpenAPIV3 } from "openapi-types";

const RATE_LIMIT_HEADERS: Record<string, OpenAPIV3.HeaderObject> = {
  "x-ratelimit-limit-requests": { description: "The caller's limit (per minute, or per day when that binds)", schema: { type: "integer" } },
  "x-ratelimit-remaining-requests": { description: "Requests left under it", schema: { type: "integer" } },
  "x-ratelimit-reset-requests": { description: "Time until it is full again (`1s`, `6m0s`)", schema: { type: "string" } },
  "x-request-id": { description: "This request's id, as in the request log", schema: { type: "string" } },
};

const withLimits = (doc: OpenAPIV3.ResponseObject): OpenAPIV3.ResponseObject => ({ ...doc, headers: RATE_LIMIT_HEADERS });

/** A model entry as the interface has it: `id` and `object`, and whatever else the gateway adds (modelEntry). */
const MODEL_SCHEMA: OpenAPIV3.SchemaObject = {
  type: "object",
  required: ["id", "object"],
  additionalProperties: true,
  properties: { id: { type: "string", description: "What clients send as `model`" }, object: { type: "string", example: "model" } },
};

const MODEL_LIST_SCHEMA: OpenAPIV3.SchemaObject = {
  type: "object",
  required: ["object", "data"],
  additionalProperties: true,
  properties: { object: { type: "string", example: "list" }, data: { type: "array", items: MODEL_SCHEMA } },
};

/** The interface's responses for createChatCompletion (its Errors table), and the others the gateway sends. */
const CHAT_RESPONSES: OpenAPIV3.ResponsesObject = {
  200: {
    description: "The completion: a JSON object, or an event stream (data: lines, ending in data: [DONE]) with stream: true",
    content: { "application/json": { schema: { type: "object", additionalProperties: true } }, "text/event-stream": { schema: { type: "string" } } },
    headers: { ...RATE_LIMIT_HEADERS, "x-gateway-overhead-ms": { description: "The gateway's own time for this request until the answer's headers, in ms (upstream waits excluded)", schema: { type: "string", example: "0.12" } } },
  },
  400: errorDoc("The body is not JSON or does not match the schema"),
  401: errorDoc("Missing or invalid API key, session or SpendAuth payment, or a non-free model without credentials"),
  402: withLimits(
    errorDoc(
      "Payment required: the balance is zero on a non-free model (insufficient_credits), the SpendAuth account's on-chain balance does not cover the amount (insufficient_balance), or the SpendAuth amount is too low (payment_required, answered before the limiter: without the x-ratelimit-* headers)",
    ),
  ),
  403: errorDoc("Sent from a page of another origin that server.cors_origins does not list, or with a session cookie from another origin"),
  404: errorDoc("No model of that name"),
  413: errorDoc("The body is larger than server.max_body_bytes"),
  429: {
    ...errorDoc("Rate limit exceeded; Retry-After says when to try again"),
    headers: { ...RATE_LIMIT_HEADERS, "retry-after": { description: "Seconds until a request would be allowed", schema: { type: "integer" } } },
  },
  502: errorDoc("Every upstream failed"),
  503: errorDoc("Every upstream of the model is cooling down, paid models are paused while the database refuses to record credits, or the bodies being read at once reached server.max_body_bytes_in_flight; Retry-After says when to try again"),
  504: errorDoc("The upstream sent no headers within first_byte_timeout_ms"),
};

/** A body that works as it is in Swagger UI's "Try it out": a configured model (a free one first, which needs no key). */
function exampleChat(deps: AppDeps): Record<string, unknown> {
  const models = deps.config.models;
  const model = (models.find((m) => m.free) ?? models[0])?.id ?? "a model id from GET /v1/models";
  return { model, messages: [{ role: "user", content: "Say hello in five words." }], max_tokens: 32 };
}

/** A route as GET /v1/models lists it: OpenAI's model object, plus price, free tier and upstream state. */
function modelEntry(route: ModelRoute, startedAt: number, now: number): Record<string, unknown> {
  return {
    id: route.id,
    object: "model",
    created: Math.floor(startedAt / 1000),
    owned_by: route.ownedBy,
    free: route.free,
    price: { prompt: route.price.prompt, completion: route.price.completion, unit: "credits per 1M tokens" },
    aliases: route.aliases,
    source: route.source,
    strategy: route.strategy,
    // Deprecated, and misnamed: the targets' circuit states alone, in target order (targets[].state
    // says the same), kept unchanged for clients that read it as a list.
    upstreams: route.targets.map((target) => targetState(target, now)),
    targets: route.targets.map((target) => ({ upstream: target.upstream.name, model: target.model, weight: target.weight, state: targetState(target, now) })),
  };
}

/** The path's model id, percent-decoded; null when its escapes are malformed. */
function decodeModelId(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

/** The routes the request's credential may use: an API key's model allowlist hides the others. */
export function visibleRoutes(deps: Pick<AppDeps, "gate" | "registry">, request: Request): ModelRoute[] {
  const allowed = deps.gate.modelFilter?.(request) ?? null;
  const routes = deps.registry.list();
  return allowed === null ? routes : routes.filter(allowed);
}

const MODELS_PREFIX = "/v1/models/";

/** GET /v1/models/{id}: the id is the rest of the path, percent-decoded once here (not by the router). */
function retrieveModel(deps: AppDeps, request: Request): Record<string, unknown> {
  const pathname = requestPath(request.url);
  const raw = pathname.slice(MODELS_PREFIX.length);
  const id = decodeModelId(raw);
  const found = id === null ? undefined : deps.registry.resolve(id);
  const allowed = deps.gate.modelFilter?.(request) ?? null;
  const route = found && (allowed === null || allowed(found)) ? found : undefined;
  if (!route) throw new GatewayError("model_not_found", `The model "${id ?? raw}" does not exist; GET /v1/models lists the available models`, { param: "model" });
  return modelEntry(route, deps.startedAt, deps.now());
}

export function modelRoutes(deps: AppDeps, chat: ChatEndpoint) {
  return new Elysia({ name: "modelgate.v1" })
    .get(
      "/v1/models",
      ({ request }) => {
        const now = deps.now();
        return { object: "list", data: visibleRoutes(deps, request).map((route) => modelEntry(route, deps.startedAt, now)) };
      },
      { detail: { operationId: "listModels", summary: "List model routes", tags: ["models"], responses: { 200: jsonDoc("The routes a client may name in `model`, with prices and upstream state", MODEL_LIST_SCHEMA) } } },
    )
    // OpenAI's "retrieve model". Ids may hold slashes (`meta-llama/Llama-3.1-8B`), sent as they are or
    // encoded: the documented route takes one path segment, a hidden twin takes the rest.
    .get("/v1/models/:model", ({ request }) => retrieveModel(deps, request), {
      detail: {
        operationId: "retrieveModel",
        summary: "One model route by id or alias (the entry GET /v1/models lists); an id with a slash may be sent as it is or as %2F",
        tags: ["models"],
        responses: { 200: jsonDoc("The model route", MODEL_SCHEMA), 404: errorDoc("No model of that name") },
      },
    })
    .get("/v1/models/*", ({ request }) => retrieveModel(deps, request), { detail: { hide: true } })
    .post("/v1/chat/completions", ({ request, server }) => chat(request, server), {
      // The endpoint reads and checks the body itself (see endpoint.ts); the schema is for the docs.
      parse: "none",
      detail: {
        operationId: "createChatCompletion",
        summary: "Create a chat completion (JSON, or an event stream with stream: true)",
        tags: ["chat"],
        security: [{ bearer: [] }, { session: [] }, { spendAuth: [] }, {}],
        requestBody: { required: true, content: { "application/json": { schema: ChatCompletionRequest as any, example: exampleChat(deps) } } },
        responses: CHAT_RESPONSES,
      },
    });
}
