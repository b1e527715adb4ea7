/**
 * What a running server may take from a config file read again (SIGHUP, `modelgate reload`), and
 * the config it serves. Most keys take effect for the requests that arrive after the reload; those
 * below are bound to what was built once at start (the listener, the database, the logger, the
 * webhook outbox, SpendAuth's chain client) and keep their running value until a restart, with a
 * warning naming them. docs/operations.md#reloading-the-config lists them too.
 */
import type { Config } from "./config/schema";
import type { LoadedConfig } from "./config/load";
import { reachableUrl } from "./listen";

const RESTART_ONLY: readonly string[] = [
  "server.listen",
  "server.data_dir",
  "server.request_log_days",
  "server.response_store_days",
  "cluster",
  "database",
  "log",
  "metrics.enabled",
  "spend_auth",
  "limits.spend_auth",
  "webhooks.enabled",
  "webhooks.bind_address",
  "webhooks.lease_ms",
  "webhooks.max_attempts",
  "webhooks.backoff_ms",
  "webhooks.backoff_max_ms",
  "webhooks.max_pending_bytes",
  "webhooks.dedupe_window_s",
  "webhooks.retain_done_hours",
];

/** Where the server listens: known once it does (a port of 0 is chosen by the system then). */
export interface Bound {
  hostname: string;
  port: number;
}

/**
 * The config a generation serves: `loaded`'s, with the keys of RESTART_ONLY as `running` has
 * them (none at start), and a public_url left unwritten following where the server listens.
 * Returns the restart-only keys whose new value waits for a restart.
 */
export function servedConfig(loaded: LoadedConfig, bound: Bound, running: Config | null): { config: Config; waiting: string[] } {
  const config = structuredClone(loaded.config);
  const waiting: string[] = [];
  for (const path of running === null ? [] : RESTART_ONLY) {
    const [section, key] = path.split(".") as [keyof Config, string | undefined];
    const before = key === undefined ? running![section] : (running![section] as Record<string, unknown>)[key];
    const after = key === undefined ? config[section] : (config[section] as Record<string, unknown>)[key];
    if (Bun.deepEquals(before, after)) continue;
    waiting.push(path);
    if (key === undefined) (config as Record<string, unknown>)[section] = structuredClone(before);
    else (config[section] as Record<string, unknown>)[key] = structuredClone(before);
  }
  if (loaded.linksFollowListen) config.server.public_url = reachableUrl(bound.hostname, bound.port);
  return { config, waiting };
}
