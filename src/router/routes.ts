/**
 * The model-facing controller: GET /v1/models (./model-list.ts) and /v1/models/{id}, and the
 * OpenAPI operations of the model endpoints (./endpoint-docs.ts). Handlers are thin: the endpoints'
 * own functions (./front-door.ts) and the model list, which the server serves as Bun routes before
 * these routes are reached; for those the routes exist for the docs and for app.handle.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import type { ModelEndpoint } from "./endpoint";
import { GatewayError } from "../errors";
import { requestPath } from "../requests/url";
import { modelEntry, modelList } from "./model-list";
import { errorDoc, jsonDoc } from "../swagger";
import { endpointDocs } from "./endpoint-docs";
import { createResponseReader } from "./responses-retrieve";
import type { OpenAPIV3 } from "openapi-types";

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

/** The path's model id, percent-decoded; null when its escapes are malformed. */
function decodeModelId(raw: string): string | null {
  try {
    return decodeURIComponent(raw);
  } catch {
    return null;
  }
}

const MODELS_PREFIX = "/v1/models/";

/** GET /v1/models/{id}: the id is the rest of the path, percent-decoded once here (not by the router). */
async function retrieveModel(deps: AppDeps, request: Request): Promise<Record<string, unknown>> {
  const pathname = requestPath(request.url);
  const raw = pathname.slice(MODELS_PREFIX.length);
  const id = decodeModelId(raw);
  const found = id === null ? undefined : deps.registry.resolve(id);
  const allowed = (await deps.gate.modelFilter?.(request)) ?? null;
  const route = found && (allowed === null || allowed(found)) ? found : undefined;
  if (!route)
    throw new GatewayError("model_not_found", `The model "${id ?? raw}" does not exist; GET /v1/models lists the available models`, { param: "model" });
  return modelEntry(route, deps.startedAt, deps.now());
}

export function modelRoutes(deps: AppDeps, endpoints: ReadonlyMap<string, ModelEndpoint>) {
  const readResponse = createResponseReader(deps);
  let app = new Elysia({ name: "modelgate.v1" })
    .get("/v1/models", ({ request }) => modelList(deps, request), {
      detail: {
        operationId: "listModels",
        summary: "List model routes",
        tags: ["models"],
        responses: { 200: jsonDoc("The routes a client may name in `model`, with prices and upstream state", MODEL_LIST_SCHEMA) },
      },
    })
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
    .get("/v1/responses/:id", ({ request, params, server }) => readResponse(request, server, params.id), {
      detail: {
        operationId: "getResponse",
        summary: "A response /v1/responses stored, to the identity that made it (previous_response_id reads the same store)",
        tags: ["responses"],
        responses: {
          200: jsonDoc("The Response object as it was answered", { type: "object", additionalProperties: true }),
          401: errorDoc("No API key or session, or a SpendAuth payment"),
          403: errorDoc("The key's address allowlist does not include the caller"),
          404: errorDoc("No stored response of that id for this caller"),
          429: errorDoc("Past the caller's rate limit (a read costs one request)"),
        },
      },
    });
  for (const doc of endpointDocs(deps)) {
    const endpoint = endpoints.get(doc.path)!;
    // The endpoint reads and checks the body itself (./endpoint.ts); the schema is for the docs.
    app = app.post(doc.path, ({ request, server }) => endpoint(request, server), { parse: "none", detail: doc.detail as any }) as unknown as typeof app;
  }
  return app;
}
