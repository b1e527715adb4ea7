/**
 * The model-facing controller: GET /v1/models and POST /v1/chat/completions. Handlers are thin;
 * the work happens in handleChat and the registry.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import type { ChatEndpoint } from "./endpoint";
import { ChatCompletionRequest } from "./schema";
import { circuitState } from "./upstream-state";

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
      },
    });
}
