/**
 * `discover = true`: imports an upstream's own GET /v1/models (as Ollama, vLLM, llama.cpp and
 * LM Studio serve it) as routes, and refreshes them every `discover_interval_s`, so models the
 * upstream adds or drops appear and disappear. A failed poll keeps the last known list.
 * What is taken is bounded: a list of at most MAX_LIST_BYTES, its first MAX_MODELS ids of at most
 * MAX_ID_CHARACTERS each, none with a control, invisible or space character other than an inner
 * plain space (a zero-width space, a bidi override or a trailing space would let an upstream list
 * a model that looks like another one in the dashboard). One poll per upstream at a time: a slow
 * poll is not overtaken (and later overwritten with an older list) by the next.
 * What changes is logged, what repeats is not: the first list, models added or dropped, a failure
 * (once per distinct message, not every interval while an upstream stays down) and the recovery.
 * An upstream that does not answer yet (started after the gateway) is polled again soon: after
 * 1 s, doubling up to discover_interval_s, then every interval once it answers.
 * With `shared` (processes sharing a database), a process polls only while it leads; meanwhile it
 * follows, reading what the leader remembered every FOLLOW_MS (or the interval, if shorter).
 */
import type { UpstreamConfig } from "../config/schema";
import { backoffDelay } from "../backoff";
import { log as serviceLog, type Logger } from "../log";
import type { ModelRegistry } from "./registry";
import { responseText } from "../response-text";
import { withoutSecrets } from "./upstream-redaction";
import type { UpstreamState } from "./upstream-setup";

export const MAX_MODELS = 1_000;
export const MAX_ID_CHARACTERS = 256;
const MAX_LIST_BYTES = 4 * 1024 * 1024;
/**
 * Control, format (zero-width, bidi), default-ignorable (variation selectors, fillers) and space
 * characters but the plain space, or a space at either end: no model name has them.
 */
const UNPRINTABLE = /[[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Z}]--[\x20]]|^\x20|\x20$/v;

const DISCOVERY_FAILED = "discovery failed: ";

/** How the last finished poll of an upstream went, for logging changes only. */
interface LastPoll {
  ids: ReadonlySet<string> | null;
  failure: string | null;
  /** The list had more than MAX_MODELS usable ids (said once, when it starts). */
  cut?: boolean;
}

/** Upstreams with a poll in flight. */
const polling = new WeakSet<UpstreamState>();
const lastPolls = new WeakMap<UpstreamState, LastPoll>();

type Log = Logger["log"];

export async function discoverOnce(registry: ModelRegistry, upstream: UpstreamConfig, log: Log = serviceLog): Promise<boolean> {
  const state = registry.upstreams.get(upstream.name);
  if (!state || polling.has(state)) return false;
  polling.add(state);
  const last = lastPolls.get(state) ?? { ids: null, failure: null };
  try {
    // A redirect is refused as chat refuses it (a base_url to correct), not followed to a list of
    // models that chat could then never reach.
    const response = await fetch(state.modelsUrl, {
      headers: state.credentials,
      signal: AbortSignal.timeout(upstream.connect_timeout_ms),
      redirect: "manual",
    });
    if (response.status >= 300 && response.status < 400) throw new Error(`answered ${response.status}, a redirect: correct base_url`);
    if (!response.ok) throw new Error(`answered ${response.status}`);
    const text = await responseText(response, MAX_LIST_BYTES);
    if (text === null) throw new Error(`answered a list over ${MAX_LIST_BYTES} bytes`);
    const body = JSON.parse(text) as { data?: { id?: unknown }[] } | null;
    if (!Array.isArray(body?.data)) throw new Error("answered without a data array");
    const listed = body.data
      .map((m) => m?.id)
      .filter((id): id is string => typeof id === "string" && id.length > 0 && id.length <= MAX_ID_CHARACTERS && !UNPRINTABLE.test(id));
    const ids = listed.slice(0, MAX_MODELS);
    const cut = listed.length > MAX_MODELS;
    if (cut && !last.cut)
      log("warn", `upstream "${upstream.name}" lists ${listed.length} models; only its first ${MAX_MODELS} are routes (configure the others in [[models]])`);
    registry.setDiscovered(upstream, ids);
    // The upstream's last error is shared with chat attempts: only a discovery error is over.
    if (state.lastError?.startsWith(DISCOVERY_FAILED)) state.lastError = null;
    const current = new Set(ids);
    if (last.failure !== null) log("info", `discovery on upstream "${upstream.name}" works again`);
    logChanges(log, upstream.name, last.ids, current);
    lastPolls.set(state, { ids: current, failure: null, cut });
    return true;
  } catch (err) {
    // The parser's message quotes the body, which may echo the upstream's credentials.
    const message = withoutSecrets(String((err as Error)?.message ?? err), state.secrets);
    state.lastError = `${DISCOVERY_FAILED}${message}`;
    if (message !== last.failure) {
      log("warn", `discovery on upstream "${upstream.name}" failed: ${message}`, { models_kept: registry.discoveredIds(upstream.name).length });
    }
    lastPolls.set(state, { ids: last.ids, failure: message, cut: last.cut });
    return false;
  } finally {
    polling.delete(state);
  }
}

/** Logs the first list of an upstream, and later the models it added and dropped (at most 20 ids of each). */
function logChanges(log: Log, upstream: string, before: ReadonlySet<string> | null, now: ReadonlySet<string>): void {
  if (before === null) {
    log("info", `discovered ${now.size} model(s) on upstream "${upstream}"`, { models: [...now].slice(0, 20) });
    return;
  }
  const added = [...now].filter((id) => !before.has(id));
  const dropped = [...before].filter((id) => !now.has(id));
  if (added.length === 0 && dropped.length === 0) return;
  log("info", `models on upstream "${upstream}" changed: ${added.length} added, ${dropped.length} dropped`, {
    added: added.slice(0, 20),
    dropped: dropped.slice(0, 20),
  });
}

/** The first retry after a failed poll; each further failure doubles it, up to the interval. */
const FIRST_RETRY_MS = 1_000;

export interface DiscoveryOptions {
  log?: Log;
  /** Called after each successful poll with the upstream's discovered ids (to remember them). */
  discovered?: (upstream: string, ids: string[]) => Promise<void> | void;
  /** One discovering process among several (./remembered-routes.ts): asked before each poll. */
  shared?: {
    leads(): Promise<boolean>;
    follow(upstream: UpstreamConfig): Promise<void>;
  };
}

/** How often a follower reads the leader's routes. */
const FOLLOW_MS = 5_000;

/** Polls every discovering upstream, at once and then on its schedule; returns a stop function. */
export function startDiscovery(registry: ModelRegistry, upstreams: UpstreamConfig[], options: DiscoveryOptions = {}): { ready: Promise<void>; stop(): void } {
  const log = options.log ?? serviceLog;
  const timers = new Map<string, Timer>();
  let stopped = false;
  const later = (upstream: UpstreamConfig, failures: number, delay: number): void => {
    const timer = setTimeout(() => void poll(upstream, failures), delay);
    timer.unref?.();
    timers.set(upstream.name, timer);
  };
  const poll = async (upstream: UpstreamConfig, failedBefore: number): Promise<void> => {
    const intervalMs = upstream.discover_interval_s * 1000;
    if (options.shared && !(await options.shared.leads())) {
      await options.shared.follow(upstream).catch(() => {});
      if (!stopped) later(upstream, 0, Math.min(FOLLOW_MS, intervalMs));
      return;
    }
    const ok = await discoverOnce(registry, upstream, log);
    if (stopped) return; // the database may be closed by now
    if (ok) await options.discovered?.(upstream.name, registry.discoveredIds(upstream.name));
    const failures = ok ? 0 : failedBefore + 1;
    later(upstream, failures, ok ? intervalMs : backoffDelay(failures, { firstMs: FIRST_RETRY_MS, maxMs: intervalMs }));
  };
  const ready = Promise.all(upstreams.filter((u) => u.discover).map((u) => poll(u, 0))).then(() => {});
  return {
    ready,
    stop: () => {
      stopped = true;
      timers.forEach(clearTimeout);
    },
  };
}
