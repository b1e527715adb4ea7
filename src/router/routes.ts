/**
 * The model-facing controller: GET /v1/models and POST /v1/chat/completions. Handlers are thin;
 * the work happens in handleChat and the registry.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import type { ChatEndpoint } from "./endpoint";
import { ChatCompletionRequest } from "./schema";
import { circuitState } from "./upstream-state";

const ERROR_BODY = { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } as const;
/** The interface's responses for createChatCompletion (its Errors table), and the others the gateway sends. */
const CHAT_RESPONSES = {
  200: {
    description: "The completion: a JSON object, or an event stream (data: lines, ending in data: [DONE]) with stream: true",
    content: { "application/json": { schema: { type: "object", additionalProperties: true } }, "text/event-stream": { schema: { type: "string" } } },
  },
  400: { description: "The body is not JSON or does not match the schema", content: ERROR_BODY },
  401: { description: "Missing or invalid API key, session or SpendAuth payment, or a non-free model without credentials", content: ERROR_BODY },
  402: { description: "Payment required: the balance is zero on a non-free model, or the SpendAuth amount is too low", content: ERROR_BODY },
  404: { description: "No model of that name", content: ERROR_BODY },
  413: { description: "The body is larger than server.max_body_bytes", content: ERROR_BODY },
  429: { description: "Rate limit exceeded; Retry-After says when to try again", content: ERROR_BODY },
  502: { description: "Every upstream failed", content: ERROR_BODY },
  503: { description: "Every upstream of the model is cooling down", content: ERROR_BODY },
  504: { description: "The upstream sent no headers within first_byte_timeout_ms", content: ERROR_BODY },
} as const;

export function modelRoutes(deps: AppDeps, chat: ChatEndpoint) {
  return new Elysia({ name: "modelgate.v1" })
    .get(
      "/v1/models",
      () => {
        const now = deps.now();
        return {
          object: "list",
          data: deps.registry.list().map((route) => ({
            id: route.id,
            object: "model",
            created: Math.floor(deps.startedAt / 1000),
            owned_by: route.ownedBy,
            free: route.free,
            price: { prompt: route.price.prompt, completion: route.price.completion, unit: "credits per 1M tokens" },
            aliases: route.aliases,
            source: route.source,
            strategy: route.strategy,
            // Circuit state per target, in target order (kept for clients that read it as a list).
            upstreams: route.targets.map((target) => circuitState(target.upstream, now)),
            targets: route.targets.map((target) => ({
              upstream: target.upstream.name,
              model: target.model,
              weight: target.weight,
              state: circuitState(target.upstream, now),
            })),
          })),
        };
      },
      { detail: { operationId: "listModels", summary: "List model routes", tags: ["models"] } },
    )
    .post("/v1/chat/completions", ({ request, server }) => chat(request, server), {
      // The endpoint reads and checks the body itself (see endpoint.ts); the schema is for the docs.
      parse: "none",
      detail: {
        operationId: "createChatCompletion",
        summary: "Create a chat completion (JSON, or an event stream with stream: true)",
        tags: ["chat"],
        security: [{ bearer: [] }, { session: [] }, { spendAuth: [] }, {}],
        requestBody: { required: true, content: { "application/json": { schema: ChatCompletionRequest as any } } },
        responses: CHAT_RESPONSES,
      },
    });
}
