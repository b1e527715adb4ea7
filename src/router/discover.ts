/**
 * `discover = true`: imports an upstream's own GET /v1/models (as Ollama, vLLM, llama.cpp and
 * LM Studio serve it) as routes, and refreshes them every `discover_interval_s`, so models the
 * upstream adds or drops appear and disappear. A failed poll keeps the last known list.
 * What is taken is bounded: a list of at most MAX_LIST_BYTES, its first MAX_MODELS ids of at most
 * MAX_ID_CHARACTERS each. One poll per upstream at a time: a slow poll is not overtaken (and later
 * overwritten with an older list) by the next.
 */
import type { UpstreamConfig } from "../config/schema";
import type { ModelRegistry } from "./registry";
import type { UpstreamState } from "./upstream-state";

export const MAX_MODELS = 1_000;
export const MAX_ID_CHARACTERS = 256;
const MAX_LIST_BYTES = 4 * 1024 * 1024;

const DISCOVERY_FAILED = "discovery failed: ";

/** Upstreams with a poll in flight. */
const polling = new WeakSet<UpstreamState>();

export async function discoverOnce(registry: ModelRegistry, upstream: UpstreamConfig): Promise<boolean> {
  const state = registry.upstreams.get(upstream.name);
  if (!state || polling.has(state)) return false;
  polling.add(state);
  try {
    const response = await fetch(state.modelsUrl, {
      headers: state.authorization ? { authorization: state.authorization } : {},
      signal: AbortSignal.timeout(upstream.connect_timeout_ms),
    });
    if (!response.ok) throw new Error(`answered ${response.status}`);
    if (Number(response.headers.get("content-length") ?? 0) > MAX_LIST_BYTES) throw new Error(`answered a list over ${MAX_LIST_BYTES} bytes`);
    const bytes = await response.arrayBuffer();
    if (bytes.byteLength > MAX_LIST_BYTES) throw new Error(`answered a list over ${MAX_LIST_BYTES} bytes`);
    const body = JSON.parse(new TextDecoder().decode(bytes)) as { data?: { id?: unknown }[] } | null;
    if (!Array.isArray(body?.data)) throw new Error("answered without a data array");
    const ids = body.data
      .map((m) => m?.id)
      .filter((id): id is string => typeof id === "string" && id.length > 0 && id.length <= MAX_ID_CHARACTERS)
      .slice(0, MAX_MODELS);
    registry.setDiscovered(upstream, ids);
    // The upstream's last error is shared with chat attempts: only a discovery error is over.
    if (state.lastError?.startsWith(DISCOVERY_FAILED)) state.lastError = null;
    return true;
  } catch (err) {
    state.lastError = `${DISCOVERY_FAILED}${(err as Error).message}`;
    return false;
  } finally {
    polling.delete(state);
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
