/**
 * The model-facing controller: GET /v1/models and POST /v1/chat/completions. Handlers are thin;
 * the work happens in handleChat and the registry.
 */
import { Elysia, t } from "elysia";
import type { AppDeps } from "../deps";
import { requestMeta } from "../request-meta";
import { readJsonBody } from "../body";
import { handleChat } from "./chat";
import { circuitState } from "./upstream-state";

const Message = t.Object(
  {
    role: t.Union([t.Literal("system"), t.Literal("user"), t.Literal("assistant"), t.Literal("tool")]),
    content: t.Union([t.String(), t.Array(t.Unknown())]),
  },
  { additionalProperties: true },
);

export const ChatCompletionRequest = t.Object(
  {
    model: t.String({ minLength: 1, description: "Model route identifier (GET /v1/models)" }),
    messages: t.Array(Message, { minItems: 1 }),
    stream: t.Optional(t.Boolean()),
    temperature: t.Optional(t.Number()),
    max_tokens: t.Optional(t.Integer({ minimum: 1 })),
  },
  { additionalProperties: true },
);

export function modelRoutes(deps: AppDeps) {
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
    .post(
      "/v1/chat/completions",
      ({ request, body, server }) => {
        const meta = requestMeta(request);
        return handleChat(deps, {
          request,
          body,
          requestId: meta.id,
          startedAt: meta.startedAt,
          clientIp: meta.clientIp(server),
        });
      },
      {
        parse: ({ request }) => readJsonBody(request, deps.config.server.max_body_bytes),
        body: ChatCompletionRequest,
        detail: {
          operationId: "createChatCompletion",
          summary: "Create a chat completion (JSON, or an event stream with stream: true)",
          tags: ["chat"],
          security: [{ bearer: [] }, { session: [] }, { spendAuth: [] }, {}],
        },
      },
    );
}
