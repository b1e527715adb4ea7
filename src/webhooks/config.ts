/**
 * The webhook config's own part of loading and checking.
 *
 * - mergeWebhooksFile: `[webhooks] config = "webhooks.toml"` names a file in the Blueprint SDK
 *   webhook crate's format (top-level `bind_address`, `[[endpoints]]`), read relative to the main
 *   config file and merged under `[webhooks]`, before the schema sees the document. A key may be
 *   set in one place only. Every later message about a key the file set names the file (KeyNames).
 * - checkWebhooks: what the schema cannot say, run by config/checks.ts on the config the schema
 *   passed: at least one endpoint when enabled, paths a request can carry, no duplicate or reserved
 *   paths, a secret where the mode needs one (a `whsec_` key for standard-webhooks); `[[jobs]]`
 *   handlers have exactly one action.
 */
import { readConfigText } from "../config/text-file";
import { isAbsolute, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ConfigError, MAIN_CONFIG_KEYS, invalidToml, type KeyNames } from "../config/errors";
import type { Config } from "../config/schema";
import type { JobHandlerConfig, WebhookEndpointConfig } from "../config/webhooks-schema";
import { resolveEnvIfSet } from "../config/secrets";
import { ID_HEADER, SECRET_PREFIX, standardWebhooksKey } from "./standard-webhooks";
import { checkTriage } from "./triage/config";

type Raw = Record<string, unknown>;

/** Paths the gateway serves itself; an endpoint may not take them. */
export const HEALTH_PATH = "/webhooks/health";
export const PULL_PREFIX = "/webhooks/jobs/";

/** Keys a webhooks.toml may carry. `service_id` is accepted and ignored, as by the crate. */
const FILE_KEYS = new Set([
  "bind_address",
  "endpoints",
  "max_body_bytes",
  "dedupe_window_s",
  "lease_ms",
  "max_attempts",
  "backoff_ms",
  "backoff_max_ms",
  "retain_done_hours",
  "retry_after_s",
  "pull_token",
  "service_id",
  "max_pending_bytes",
  "max_body_bytes_in_flight",
]);
const SECRET_MODES = new Set<string>(["bearer", "hmac-sha256", "api-key", "standard-webhooks"]);
/** Secrets compared with a header's value: a header cannot carry a line break or (readably) non-ASCII. */
const HEADER_SECRET_MODES = new Set<string>(["bearer", "api-key"]);
const HEADER_SECRET = /^[\x21-\x7e]+$/;
/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a request path carries unencoded (RFC 3986 pchar and "/"); paths are compared as sent. */
const REQUEST_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;

function isObject(value: unknown): value is Raw {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date);
}

/** The document with the webhooks file (if any) merged under `[webhooks]`, and how messages name its keys. */
export function mergeWebhooksFile(raw: Raw, baseDir: string, env: Record<string, string | undefined>): { raw: Raw; names: KeyNames } {
  const section = raw.webhooks;
  const unchanged = { raw, names: MAIN_CONFIG_KEYS };
  if (!isObject(section) || section.config === undefined) return unchanged;
  // `env:` references are resolved here for this step only (the whole config is resolved later):
  // the file's name may come from the environment.
  const config = resolveEnvIfSet(section.config, "webhooks.config", env);
  if (config === undefined) return unchanged;
  if (typeof config !== "string" || config === "") {
    throw new ConfigError("webhooks.config: must be the path of a webhooks.toml file");
  }
  const file = isAbsolute(config) ? config : resolve(baseDir, config);
  const text = readConfigText(file, `webhooks.config: ${file}`);
  let doc: Raw;
  try {
    doc = parseToml(text) as Raw;
  } catch (err) {
    throw invalidToml(`webhooks.config: ${file}`, err);
  }
  const merged: Raw = { ...section };
  for (const [key, value] of Object.entries(doc)) {
    if (!FILE_KEYS.has(key)) throw new ConfigError(`${file}: ${key}: unknown key`);
    if (key === "service_id") continue;
    if (key in section) {
      throw new ConfigError(`webhooks.${key}: set both inline and in ${file}; keep one`);
    }
    merged[key] = value;
  }
  return { raw: { ...raw, webhooks: merged }, names: fileKeyNames(file, Object.keys(doc)) };
}

/** Names `webhooks.KEY…` as `FILE: KEY…` for each KEY the webhooks file set. */
function fileKeyNames(file: string, keys: string[]): KeyNames {
  const inFile = (path: string): string | null => {
    const key = keys.find((k) => {
      const prefix = `webhooks.${k}`;
      return path === prefix || path.startsWith(`${prefix}.`) || path.startsWith(`${prefix}[`);
    });
    return key === undefined ? null : path.slice("webhooks.".length);
  };
  return {
    say: (path) => {
      const local = inFile(path);
      return local === null ? path : `${file}: ${local}`;
    },
    local: (path) => inFile(path) ?? path,
  };
}

/**
 * What the schema cannot say of `[webhooks]` and `[[jobs]]`, on the config the schema passed:
 * endpoints when enabled, paths a request can carry and no two alike, a secret where the mode needs
 * one, header-safe names and secrets, one action per job and one handler per job id.
 */
export function checkWebhooks(config: Pick<Config, "webhooks" | "jobs">, options: { names: KeyNames; baseDir: string }): void {
  const { webhooks } = config;
  checkEndpoints(webhooks.endpoints, options.names);
  if (webhooks.enabled && webhooks.endpoints.length === 0) {
    throw new ConfigError(`${options.names.say("webhooks.endpoints")}: at least one endpoint is required when webhooks are enabled`);
  }
  checkJobs(config.jobs, options.baseDir);
}

function checkEndpoints(endpoints: WebhookEndpointConfig[], names: KeyNames): void {
  const seen = new Map<string, number>();
  endpoints.forEach((endpoint, i) => {
    const at = names.say(`webhooks.endpoints[${i}]`);
    const { path, auth, secret } = endpoint;
    if (!path.startsWith("/")) throw new ConfigError(`${at}.path: must start with "/" (got "${path}")`);
    if (!REQUEST_PATH.test(path)) {
      throw new ConfigError(
        `${at}.path: ${JSON.stringify(path)} cannot arrive as written (spaces, "?", "#" and non-ASCII are sent percent-encoded; write it that way)`,
      );
    }
    if (path === HEALTH_PATH || path.startsWith(PULL_PREFIX)) {
      throw new ConfigError(`${at}.path: "${path}" is reserved by the gateway`);
    }
    const first = seen.get(path);
    if (first !== undefined) throw new ConfigError(`${at}.path: duplicate path "${path}" (also ${names.local(`webhooks.endpoints[${first}]`)})`);
    seen.set(path, i);
    if (SECRET_MODES.has(auth) && (secret === undefined || secret === "")) {
      throw new ConfigError(`${at}.secret: required for auth "${auth}"`);
    }
    if (HEADER_SECRET_MODES.has(auth) && secret !== undefined && !HEADER_SECRET.test(secret)) {
      throw new ConfigError(
        `${at}.secret: the ${auth} secret is sent in a header, so it must be printable ASCII without spaces or line breaks (a trailing newline in the environment variable?)`,
      );
    }
    checkStandardWebhooks(endpoint, at);
    if (endpoint.name !== undefined && !/^[\x20-\x7e]*$/.test(endpoint.name)) {
      throw new ConfigError(`${at}.name: it is sent as the X-WEBHOOK-NAME header, so it must be printable ASCII (no line breaks, no "–" or other non-ASCII)`);
    }
    for (const key of ["api_key_header", "dedupe_header"] as const) {
      const name = endpoint[key];
      if (name !== undefined && !HEADER_NAME.test(name)) throw new ConfigError(`${at}.${key}: ${JSON.stringify(name)} is not a header name`);
    }
  });
}

/** A Standard Webhooks secret is the sender's `whsec_` key; tolerance_s and webhook-id belong to that mode alone. */
function checkStandardWebhooks(endpoint: WebhookEndpointConfig, at: string): void {
  const { auth, secret, tolerance_s, dedupe_header } = endpoint;
  if (auth !== "standard-webhooks") {
    if (tolerance_s !== undefined) throw new ConfigError(`${at}.tolerance_s: only for auth "standard-webhooks"`);
    return;
  }
  if (secret !== undefined && secret !== "" && standardWebhooksKey(secret) === null) {
    throw new ConfigError(
      `${at}.secret: a standard-webhooks secret is "${SECRET_PREFIX}" followed by base64, as the sender shows it (a trailing newline in the environment variable?)`,
    );
  }
  if (dedupe_header !== undefined && dedupe_header.toLowerCase() !== ID_HEADER) {
    throw new ConfigError(
      `${at}.dedupe_header: standard-webhooks endpoints fold redeliveries on ${ID_HEADER}, the id the signature covers; remove dedupe_header`,
    );
  }
}

function checkJobs(jobs: JobHandlerConfig[], baseDir: string): void {
  const seen = new Set<number>();
  jobs.forEach((job, i) => {
    const actions = [job.command, job.forward, job.triage].filter((a) => a !== undefined).length;
    if (actions !== 1) throw new ConfigError(`jobs[${i}]: set exactly one of "command", "forward" or "triage"`);
    checkTriage(job, `jobs[${i}]`, baseDir);
    if (seen.has(job.job_id)) throw new ConfigError(`jobs[${i}].job_id: another [[jobs]] handler already takes job ${job.job_id}`);
    seen.add(job.job_id);
  });
}
