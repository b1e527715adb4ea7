/**
 * GET /v1/models's answer: the model routes the request's credential may use, each as OpenAI's
 * model object plus price, free tier and target state. The server serves it as a plain Bun route
 * (../plain-routes.ts), so that clients listing models do not build the app; the app's route
 * (./routes.ts) gives the same answer, and /v1/models/{id} the same entries.
 */
import type { AppDeps } from "../deps";
import type { ModelRoute } from "./registry";
import { targetState } from "./target-state";

/** A route as GET /v1/models lists it: OpenAI's model object, plus price, free tier and upstream state. */
export function modelEntry(route: ModelRoute, startedAt: number, now: number): Record<string, unknown> {
  return {
    id: route.id,
    object: "model",
    created: Math.floor(startedAt / 1000),
    owned_by: route.ownedBy,
    free: route.free,
    price: {
      prompt: route.price.prompt,
      completion: route.price.completion,
      request: route.price.request,
      unit: "credits per 1M tokens; request: credits per call",
    },
    endpoints: route.endpoints,
    aliases: route.aliases,
    source: route.source,
    strategy: route.strategy,
    // Deprecated, and misnamed: the targets' circuit states alone, in target order (targets[].state
    // says the same), kept unchanged for clients that read it as a list.
    upstreams: route.targets.map((target) => targetState(target, now)),
    targets: route.targets.map((target) => ({ upstream: target.upstream.name, model: target.model, weight: target.weight, state: targetState(target, now) })),
  };
}

/** The routes the request's credential may use: an API key's model allowlist hides the others. */
async function visibleRoutes(deps: Pick<AppDeps, "gate" | "registry">, request: Request): Promise<ModelRoute[]> {
  const allowed = (await deps.gate.modelFilter?.(request)) ?? null;
  const routes = deps.registry.list();
  return allowed === null ? routes : routes.filter(allowed);
}

/** The list GET /v1/models answers. */
export async function modelList(
  deps: Pick<AppDeps, "gate" | "registry" | "startedAt" | "now">,
  request: Request,
): Promise<{ object: "list"; data: Record<string, unknown>[] }> {
  const now = deps.now();
  return { object: "list", data: (await visibleRoutes(deps, request)).map((route) => modelEntry(route, deps.startedAt, now)) };
}
