/**
 * `env:VAR` references: any string of the config may be written `env:VAR` and is replaced by the
 * variable's value. The paths and values of secrets are collected on the way, for redaction and
 * to keep them from `[[jobs]]` commands' environments.
 */
import { ConfigError } from "./load";
import { SECRET_KEYS } from "./schema";

/**
 * "refuse": an unset variable is a ConfigError naming it (serve, config check). "allow": under a
 * secret key it leaves the `env:VAR` as written, for a config that is checked but whose secrets
 * are never used (loadDataDir); other keys (data_dir, URLs) must still resolve to be checked.
 */
export type UnsetSecrets = "refuse" | "allow";

export interface Secrets {
  paths: Set<string>;
  /** Values of at least MIN_REDACTED characters: a shorter one would garble every text it is taken out of. */
  values: Set<string>;
  env: Set<string>;
  unsetSecrets: UnsetSecrets;
  /** Paths of the secrets left as `env:VAR` (only with "allow"): their values cannot be checked. */
  unresolved: Set<string>;
}

const MIN_REDACTED = 6;

export function resolveSecrets(value: unknown, path: string, env: Record<string, string | undefined>, secrets: Secrets): unknown {
  if (typeof value === "string") {
    const key = path.slice(path.lastIndexOf(".") + 1);
    if (SECRET_KEYS.has(key)) {
      secrets.paths.add(path);
      if (!value.startsWith("env:") && value.length >= MIN_REDACTED) secrets.values.add(value);
    }
    if (!value.startsWith("env:")) return value;
    const name = value.slice(4);
    const found = env[name];
    if (found === undefined || found === "") {
      if (secrets.unsetSecrets === "allow" && SECRET_KEYS.has(key)) {
        secrets.unresolved.add(path);
        return value;
      }
      throw new ConfigError(`${path}: environment variable ${name} is not set`);
    }
    secrets.paths.add(path);
    if (found.length >= MIN_REDACTED) secrets.values.add(found);
    secrets.env.add(name);
    return found;
  }
  if (Array.isArray(value)) {
    return value.map((item, i) => resolveSecrets(item, `${path}[${i}]`, env, secrets));
  }
  if (value !== null && typeof value === "object" && !(value instanceof Date)) {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) {
      out[key] = resolveSecrets(item, path ? `${path}.${key}` : key, env, secrets);
    }
    return out;
  }
  return value;
}
