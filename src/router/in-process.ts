/**
 * The gateway calling its own models, for its jobs (alert triage): a chat completion through the
 * same pipeline a POST /v1/chat/completions takes (./pipeline.ts: limits, credits, failover, the
 * request log, metrics), with no HTTP round trip and no key. Only admission differs: the Gate's
 * admitInProcess, as the job's `as_user` or the built-in service identity (free models only).
 */
import type { AppDeps } from "../deps";
import { GatewayError } from "../errors";
import type { Gate } from "../auth/types";
import type { ModelAnswer, ModelCall } from "../webhooks/triage/model";
import { chatAdapter } from "./adapters/chat";
import { handleCall } from "./pipeline";

/** The URL the pipeline sees: never fetched, it names the endpoint in logs. */
const IN_PROCESS_URL = "http://modelgate.internal/v1/chat/completions";

/** Statuses a later try may not get: the model or the caller's standing may change. */
function mayPass(status: number): boolean {
  return status >= 500 || status === 429 || status === 408;
}

/** `current`: the deps of the config serving now (a reload replaces them). */
export function createModelCaller(current: () => AppDeps): (call: ModelCall) => Promise<ModelAnswer> {
  let calls = 0;
  return async function callModel(call) {
    const deps = current();
    const route = deps.registry.resolve(call.model);
    if (!route) return { ok: false, retry: true, error: `no model "${call.model}" (yet: a discovered model may appear)` };
    const gate: Gate = {
      admit: (input) =>
        deps.gate.admitInProcess?.(input, call.asUser) ?? new GatewayError("authentication_required", "this gateway admits no in-process calls"),
    };
    const body = { model: call.model, messages: [{ role: "user", content: call.prompt }], max_tokens: call.maxTokens, stream: false };
    const requestId = `job_${Date.now().toString(36)}_${(calls++).toString(36)}`;
    const request = new Request(IN_PROCESS_URL, { method: "POST", signal: AbortSignal.timeout(call.timeoutMs) });
    try {
      chatAdapter.check(body);
      await chatAdapter.checkRoute?.(body, route);
      const response = await handleCall(
        { ...deps, gate },
        {
          request,
          adapter: chatAdapter,
          upload: null,
          route,
          body,
          bodyBytes: JSON.stringify(body).length,
          requestId,
          startedAt: performance.now(),
          clientIp: () => "127.0.0.1",
        },
      );
      const text = await response.text();
      if (!response.ok)
        return { ok: false, retry: mayPass(response.status), error: `model "${call.model}" answered HTTP ${response.status}: ${text.slice(0, 200)}` };
      const content = (JSON.parse(text) as { choices?: Array<{ message?: { content?: unknown } }> }).choices?.[0]?.message?.content;
      return typeof content === "string" ? { ok: true, text: content } : { ok: false, retry: true, error: `model "${call.model}" answered without a message` };
    } catch (error) {
      if (error instanceof GatewayError) return { ok: false, retry: mayPass(error.status), error: `model "${call.model}": ${error.message}` };
      return { ok: false, retry: true, error: `model "${call.model}": ${String((error as Error)?.message ?? error)}` };
    }
  };
}
