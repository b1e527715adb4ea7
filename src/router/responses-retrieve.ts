/**
 * GET /v1/responses/{id}: a response /v1/responses stored (./response-store.ts), to the identity
 * that made it. The caller is identified as for a model call (an API key or a session; the
 * Gate's identify), and another identity's id reads exactly as an unknown one: a 404.
 */
import type { AppDeps } from "../deps";
import { GatewayError } from "../errors";
import { createResponseStore, responseOwner, type ResponseStore } from "./response-store";

export function createResponseReader(deps: AppDeps): (request: Request, id: string) => Record<string, unknown> {
  let store: ResponseStore | null = null;
  return (request, id) => {
    const identity = deps.gate.identify?.(request) ?? null;
    if (identity instanceof GatewayError) throw identity;
    const owner = identity === null ? null : responseOwner(identity);
    if (owner === null) {
      throw new GatewayError("authentication_required", "Stored responses belong to the API key's or session's user that made them, and anonymous calls store none: authenticate to read one");
    }
    store ??= createResponseStore(deps.db, { maxBytes: deps.config.server.response_store_max_bytes, now: deps.now });
    const stored = store.get(id, owner);
    if (stored === null) throw new GatewayError("not_found", `No stored response with id "${id.slice(0, 100)}"`, { param: "response_id" });
    return stored.response;
  };
}
