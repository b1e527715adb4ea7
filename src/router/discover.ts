/**
 * `discover = true`: imports an upstream's own GET /v1/models (as Ollama, vLLM, llama.cpp and
 * LM Studio serve it) as routes, and refreshes them every `discover_interval_s`, so models the
 * upstream adds or drops appear and disappear. A failed poll keeps the last known list.
 */
import type { UpstreamConfig } from "../config/schema";
import type { ModelRegistry } from "./registry";

export async function discoverOnce(registry: ModelRegistry, upstream: UpstreamConfig): Promise<boolean> {
  const state = registry.upstreams.get(upstream.name);
  if (!state) return false;
  try {
    const response = await fetch(state.modelsUrl, {
      headers: state.authorization ? { authorization: state.authorization } : {},
      signal: AbortSignal.timeout(upstream.connect_timeout_ms),
    });
    if (!response.ok) throw new Error(`answered ${response.status}`);
    const body = (await response.json()) as { data?: { id?: unknown }[] };
    if (!Array.isArray(body.data)) throw new Error("answered without a data array");
    const ids = body.data.map((m) => m?.id).filter((id): id is string => typeof id === "string" && id.length > 0);
    registry.setDiscovered(upstream, ids);
    return true;
  } catch (err) {
    state.lastError = `discovery failed: ${(err as Error).message}`;
    return false;
  }
}

/** Polls every discovering upstream; returns a stop function. */
export function startDiscovery(registry: ModelRegistry, upstreams: UpstreamConfig[]): { ready: Promise<void>; stop(): void } {
  const timers: Timer[] = [];
  const discovering = upstreams.filter((u) => u.discover);
  for (const upstream of discovering) {
    const timer = setInterval(() => void discoverOnce(registry, upstream), upstream.discover_interval_s * 1000);
    timer.unref?.();
    timers.push(timer);
  }
  const ready = Promise.all(discovering.map((u) => discoverOnce(registry, u))).then(() => {});
  return { ready, stop: () => timers.forEach(clearInterval) };
}
