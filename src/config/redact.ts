/**
 * What `config check` prints: the resolved config with its secrets as "<redacted>" (the values of
 * secret keys, and the parts of URLs that carry keys). What runs is the config as written.
 */
import type { Config } from "./schema";
import { SECRET_URL_PATH } from "./secrets";
import { parseAddress } from "../listen";

/** What redacting reads of a loaded config (a LoadedConfig has it; load.ts imports this module). */
export interface RedactableConfig {
  config: Config;
  secretPaths: Set<string>;
  linksFollowListen: boolean;
}

/**
 * The resolved config as JSON with every secret replaced by "<redacted>": the values of secret
 * keys, and in any URL its user, password, query and fragment, plus the path of the URLs whose
 * path is usually the key (an RPC provider's `/v3/<project key>`, a Slack webhook's `/services/…`).
 */
export function redactedConfig(loaded: RedactableConfig): unknown {
  const walk = (value: unknown, path: string): unknown => {
    if (loaded.secretPaths.has(path) && value !== undefined) return "<redacted>";
    if (typeof value === "string" && /^https?:\/\//i.test(value)) return redactedUrl(value, { path: SECRET_URL_PATH.test(path) });
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${path}[${i}]`));
    if (value !== null && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, path ? `${path}.${k}` : k)]));
    }
    return value;
  };
  const shown = walk(loaded.config, "") as { server: { public_url: string | null } };
  // Unwritten, public_url follows listen; a port of 0 is chosen by the system only at start: null.
  if (loaded.linksFollowListen && parseAddress(loaded.config.server.listen).port === 0) shown.server.public_url = null;
  return shown;
}

/** A URL with its user, password, query and fragment (and, with `path`, its path) shown as <redacted>; one that does not parse, whole. */
export function redactedUrl(text: string, options: { path: boolean }): string {
  const url = URL.parse(text);
  if (url === null) return "<redacted>";
  const hidden = Boolean(url.username || url.password || url.search || url.hash || (options.path && url.pathname !== "/"));
  if (!hidden) return text;
  if (url.username) url.username = "<redacted>";
  if (url.password) url.password = "<redacted>";
  if (url.search) url.search = "?<redacted>";
  if (url.hash) url.hash = "#<redacted>";
  if (options.path && url.pathname !== "/") url.pathname = "/<redacted>";
  return url.href.replaceAll("%3Credacted%3E", "<redacted>");
}
