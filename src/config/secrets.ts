/**
 * `env:VAR` references: any string of the config may be written `env:VAR` and is replaced by the
 * variable's value; an unset or empty one is an UnsetVariableError naming the key and the variable.
 * The paths and values of secrets are collected on the way, for redaction and to keep them from
 * `[[jobs]]` commands' environments.
 */
import { ConfigError, UnsetVariableError, type UnsetVariable } from "./errors";
import { SECRET_KEYS, SECRET_PATHS } from "./schema";

export interface Secrets {
  paths: Set<string>;
  /** Values of at least MIN_REDACTED characters: a shorter one would garble every text it is taken out of. */
  values: Set<string>;
  env: Set<string>;
  /** References whose variable is unset or empty (left unresolved); the caller throws one UnsetVariableError for all. */
  unset: UnsetVariable[];
}

/** Secrets shorter than this are not taken out of texts: placeholder keys (`EMPTY`, `null`, `e`) would garble every message. */
export const MIN_REDACTED = 6;

/** `value` with its `env:` references resolved, for a step that needs them before the whole config is (nothing collected). */
export function resolveEnv(value: unknown, path: string, env: Record<string, string | undefined>): unknown {
  const { resolved, unset } = resolveAlone(value, path, env);
  if (unset.length > 0) throw new UnsetVariableError(unset);
  return resolved;
}

/**
 * The same, for a step that can wait: undefined when a variable it names is unset, left to the
 * whole config's resolution, which names every unset variable at once.
 */
export function resolveEnvIfSet(value: unknown, path: string, env: Record<string, string | undefined>): unknown {
  const { resolved, unset } = resolveAlone(value, path, env);
  return unset.length > 0 ? undefined : resolved;
}

function resolveAlone(value: unknown, path: string, env: Record<string, string | undefined>): { resolved: unknown; unset: UnsetVariable[] } {
  const secrets: Secrets = { paths: new Set(), values: new Set(), env: new Set(), unset: [] };
  return { resolved: resolveSecrets(value, path, env, secrets), unset: secrets.unset };
}

export function resolveSecrets(value: unknown, path: string, env: Record<string, string | undefined>, secrets: Secrets): unknown {
  if (typeof value === "string") {
    if (SECRET_KEYS.has(path.slice(path.lastIndexOf(".") + 1)) || SECRET_PATHS.has(path)) {
      secrets.paths.add(path);
      if (!value.startsWith("env:") && value.length >= MIN_REDACTED) secrets.values.add(value);
    }
    if (!value.startsWith("env:")) {
      addUrlSecrets(value, path, secrets);
      return value;
    }
    const name = value.slice(4);
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new ConfigError(`${path}: "env:" must be followed by an environment variable's name (letters, digits, _)`);
    const found = env[name];
    if (found === undefined || found === "") {
      secrets.unset.push({ path, variable: name, state: found === undefined ? "unset" : "empty" });
      return value;
    }
    secrets.paths.add(path);
    if (found.length >= MIN_REDACTED) secrets.values.add(found);
    secrets.env.add(name);
    addUrlSecrets(found, path, secrets);
    return found;
  }
  if (Array.isArray(value)) {
    return value.map((item, i) => resolveSecrets(item, `${path}[${i}]`, env, secrets));
  }
  if (value !== null && typeof value === "object" && !(value instanceof Date)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      // TOML may name a key `__proto__`: assigned here it would set the prototype, not a key.
      if (key === "__proto__") throw new ConfigError(`${path ? `${path}.${key}` : key}: unknown key`);
      out[key] = resolveSecrets(item, path ? `${path}.${key}` : key, env, secrets);
    }
    return out;
  }
  return value;
}

/** A query parameter whose name says it carries a credential (`key`, `api-key`, `access_token`, Azure's `sig` and `code`). */
const SECRET_PARAM = /key|token|secret|sig|pass|auth|code|cred/i;

/** Config keys whose URL's path is usually a credential (an RPC provider's `/v3/<project key>`, a Slack webhook's `/services/…`). */
export const SECRET_URL_PATH = /^(spend_auth\.rpc_url|jobs\[\d+\]\.forward|jobs\[\d+\]\.notify\[\d+\]\.url)$/;

/**
 * Of an http(s) config value, the parts `config check` hides that carry credentials, kept as
 * secret values: a job's failure that quotes them is redacted like a key (see urlSecretParts).
 */
function addUrlSecrets(text: string, path: string, secrets: Secrets): void {
  if (!/^https?:\/\//i.test(text)) return;
  const url = URL.parse(text);
  if (url !== null) for (const part of urlSecretParts(url, { path: SECRET_URL_PATH.test(path) })) secrets.values.add(part);
}

/**
 * The parts of `url` that carry credentials, as written and percent-decoded, each of at least
 * MIN_REDACTED characters: its password, its query whole and the values of its SECRET_PARAM
 * parameters, its fragment, and with `path` its path (an RPC provider's `/v3/<key>`). Not its user
 * name, nor other query values (`api-version=2024-06-01`) or path segments (`webhook`): taken out of
 * texts, common words would garble them.
 */
export function urlSecretParts(url: URL, options: { path: boolean }): string[] {
  const parts = [url.password, url.search.slice(1), url.hash.slice(1)];
  for (const pair of url.search.slice(1).split("&")) {
    const at = pair.indexOf("=");
    if (at > 0 && SECRET_PARAM.test(percentDecoded(pair.slice(0, at)))) parts.push(pair.slice(at + 1));
  }
  if (options.path && url.pathname !== "/") parts.push(url.pathname.slice(1));
  return [...new Set(parts.flatMap((part) => [part, percentDecoded(part)]).filter((part) => part.length >= MIN_REDACTED))];
}

/** A URL's part as typed (`p%40ss` is `p@ss`); a stray `%` is taken literally. */
export function percentDecoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
