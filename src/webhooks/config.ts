/**
 * Loading and checking the webhook config before the schema sees it.
 *
 * - mergeWebhooksFile: `[webhooks] config = "webhooks.toml"` names a file in the Blueprint SDK
 *   webhook crate's format (top-level `bind_address`, `[[endpoints]]`), read relative to the main
 *   config file and merged under `[webhooks]`. A key may be set in one place only. A later error
 *   about a key the file set names the file (namingWebhooksFile).
 * - checkWebhooks: the crate's validation with messages naming the key path: at least one
 *   endpoint when enabled, path starts with '/', no duplicate or reserved paths, a known auth
 *   mode, a secret where the mode needs one (a `whsec_` key for standard-webhooks); `[[jobs]]`
 *   handlers have exactly one action.
 * Both work on the raw TOML document (untrusted shapes), so they narrow every value they read.
 */
import { readConfigText } from "../config/text-file";
import { isAbsolute, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { ConfigError, invalidToml } from "../config/errors";
import { AUTH_MODES } from "../config/webhooks-schema";
import { resolveEnvIfSet } from "../config/secrets";
import { ID_HEADER, SECRET_PREFIX, standardWebhooksKey } from "./standard-webhooks";
import { checkTriage } from "./triage/config";

type Raw = Record<string, unknown>;

/** Paths the gateway serves itself; an endpoint may not take them. */
export const HEALTH_PATH = "/webhooks/health";
export const PULL_PREFIX = "/webhooks/jobs/";

/** Keys a webhooks.toml may carry. `service_id` is accepted and ignored, as by the crate. */
const FILE_KEYS = new Set([
  "bind_address", "endpoints", "max_body_bytes", "dedupe_window_s", "lease_ms", "max_attempts",
  "backoff_ms", "backoff_max_ms", "retain_done_hours", "retry_after_s", "pull_token", "service_id", "max_pending_bytes", "max_body_bytes_in_flight",
]);
const SECRET_MODES = new Set(["bearer", "hmac-sha256", "api-key", "standard-webhooks"]);
/** Secrets compared with a header's value: a header cannot carry a line break or (readably) non-ASCII. */
const HEADER_SECRET_MODES = new Set(["bearer", "api-key"]);
const HEADER_SECRET = /^[\x21-\x7e]+$/;
/** An HTTP header name (RFC 9110 token). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** What a request path carries unencoded (RFC 3986 pchar and "/"); paths are compared as sent. */
const REQUEST_PATH = /^\/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*$/;

function isObject(value: unknown): value is Raw {
  return value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Date);
}

/** Returns the document with the webhooks file (if any) merged under `[webhooks]`. */
export function mergeWebhooksFile(raw: Raw, baseDir: string, env: Record<string, string | undefined>): Raw {
  const section = raw.webhooks;
  if (!isObject(section) || section.config === undefined) return raw;
  // `env:` references are resolved here for this step only (the whole config is resolved later):
  // the file's name may come from the environment, and its endpoints are checked as they will run.
  const config = resolveEnvIfSet(section.config, "webhooks.config", env);
  if (config === undefined) return raw;
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
  if (Array.isArray(doc.endpoints)) checkFileEndpoints(doc.endpoints, file, env);
  const result = { ...raw, webhooks: merged };
  fileKeys.set(result, { file, keys: Object.keys(doc) });
  return result;
}

/** Which keys of a merged document came from which webhooks file. */
const fileKeys = new WeakMap<Raw, { file: string; keys: string[] }>();

/**
 * `error` (found after the merge: types, ranges, unset variables) with every key path the
 * webhooks file set written as that file's (`webhooks.endpoints[1].job_id` becomes
 * `/etc/modelgate/webhooks.toml: endpoints[1].job_id`), as the checks made while merging write it.
 */
export function namingWebhooksFile<E>(error: E, merged: Raw): E {
  const from = fileKeys.get(merged);
  if (from === undefined || !(error instanceof ConfigError)) return error;
  // Replacements as functions: a "$" in the file's path is no pattern.
  const named = (written: string) => (): string => written;
  for (const key of from.keys) {
    error.message = error.message
      .replaceAll(`[[webhooks.${key}]]`, named(`[[${key}]]`))
      .replace(new RegExp(`\\bwebhooks\\.${key}(?![A-Za-z0-9_])`, "g"), named(`${from.file}: ${key}`));
  }
  return error;
}

/**
 * The file's endpoints checked as they will run (secrets resolved), naming the file. An unset
 * variable is left to the whole config's resolution, which names every one at once.
 */
function checkFileEndpoints(endpoints: unknown[], file: string, env: Record<string, string | undefined>): void {
  const resolved = resolveEnvIfSet(endpoints, `${file}: endpoints`, env) as unknown[] | undefined;
  if (resolved !== undefined) checkEndpoints(resolved, `${file}: endpoints`);
}

/** Structural checks with clear messages; type and range errors are left to the schema. `baseDir`: where a `file:` prompt is read from. */
export function checkWebhooks(raw: Raw, baseDir: string = process.cwd()): void {
  const section = raw.webhooks;
  if (isObject(section)) {
    if ("service_id" in section) {
      throw new ConfigError("webhooks.service_id: set at run time with --service-id or $MODELGATE_SERVICE_ID, not in TOML");
    }
    const endpoints = section.endpoints;
    if (Array.isArray(endpoints)) checkEndpoints(endpoints, "webhooks.endpoints");
    const count = Array.isArray(endpoints) ? endpoints.length : 0;
    if (section.enabled === true && count === 0) {
      throw new ConfigError("webhooks.endpoints: at least one endpoint is required when webhooks are enabled");
    }
  }
  if (Array.isArray(raw.jobs)) checkJobs(raw.jobs, baseDir);
}

function checkEndpoints(endpoints: unknown[], label: string): void {
  const seen = new Map<string, number>();
  endpoints.forEach((endpoint, i) => {
    const at = `${label}[${i}]`;
    if (!isObject(endpoint)) return;
    const { path, auth, secret } = endpoint;
    if (typeof path === "string") {
      if (!path.startsWith("/")) throw new ConfigError(`${at}.path: must start with "/" (got "${path}")`);
      if (!REQUEST_PATH.test(path)) {
        throw new ConfigError(`${at}.path: ${JSON.stringify(path)} cannot arrive as written (spaces, "?", "#" and non-ASCII are sent percent-encoded; write it that way)`);
      }
      if (path === HEALTH_PATH || path.startsWith(PULL_PREFIX)) {
        throw new ConfigError(`${at}.path: "${path}" is reserved by the gateway`);
      }
      const first = seen.get(path);
      if (first !== undefined) throw new ConfigError(`${at}.path: duplicate path "${path}" (also ${label}[${first}])`);
      seen.set(path, i);
    }
    if (auth !== undefined && !(AUTH_MODES as readonly unknown[]).includes(auth)) {
      throw new ConfigError(`${at}.auth: unknown auth mode ${JSON.stringify(auth)} (expected one of ${AUTH_MODES.join(", ")})`);
    }
    // Not echoed: it is a secret. (Unquoted digits are a TOML integer, which is no secret at all.)
    if (secret !== undefined && typeof secret !== "string") throw new ConfigError(`${at}.secret: expected a string; write the secret in quotes`);
    if (typeof auth === "string" && SECRET_MODES.has(auth) && (typeof secret !== "string" || secret === "")) {
      throw new ConfigError(`${at}.secret: required for auth "${auth}"`);
    }
    if (typeof auth === "string" && HEADER_SECRET_MODES.has(auth) && typeof secret === "string" && !HEADER_SECRET.test(secret)) {
      throw new ConfigError(`${at}.secret: the ${auth} secret is sent in a header, so it must be printable ASCII without spaces or line breaks (a trailing newline in the environment variable?)`);
    }
    checkStandardWebhooks(endpoint, at);
    const { name } = endpoint;
    if (typeof name === "string" && !/^[\x20-\x7e]*$/.test(name)) {
      throw new ConfigError(`${at}.name: it is sent as the X-WEBHOOK-NAME header, so it must be printable ASCII (no line breaks, no "–" or other non-ASCII)`);
    }
    for (const key of ["api_key_header", "dedupe_header"]) {
      const name = endpoint[key];
      if (typeof name === "string" && !HEADER_NAME.test(name)) throw new ConfigError(`${at}.${key}: ${JSON.stringify(name)} is not a header name`);
    }
  });
}

/** A Standard Webhooks secret is the sender's `whsec_` key; tolerance_s and webhook-id belong to that mode alone. */
function checkStandardWebhooks(endpoint: Raw, at: string): void {
  const { auth, secret, tolerance_s, dedupe_header } = endpoint;
  if (auth !== "standard-webhooks") {
    if (tolerance_s !== undefined) throw new ConfigError(`${at}.tolerance_s: only for auth "standard-webhooks"`);
    return;
  }
  if (typeof secret === "string" && secret !== "" && standardWebhooksKey(secret) === null) {
    throw new ConfigError(`${at}.secret: a standard-webhooks secret is "${SECRET_PREFIX}" followed by base64, as the sender shows it (a trailing newline in the environment variable?)`);
  }
  if (typeof dedupe_header === "string" && dedupe_header.toLowerCase() !== ID_HEADER) {
    throw new ConfigError(`${at}.dedupe_header: standard-webhooks endpoints fold redeliveries on ${ID_HEADER}, the id the signature covers; remove dedupe_header`);
  }
}

function checkJobs(jobs: unknown[], baseDir: string): void {
  const seen = new Set<unknown>();
  jobs.forEach((job, i) => {
    if (!isObject(job)) return;
    const actions = [job.command, job.forward, job.triage].filter((a) => a !== undefined).length;
    if (actions !== 1) throw new ConfigError(`jobs[${i}]: set exactly one of "command", "forward" or "triage"`);
    checkTriage(job, `jobs[${i}]`, baseDir);
    if (seen.has(job.job_id)) throw new ConfigError(`jobs[${i}].job_id: another [[jobs]] handler already takes job ${job.job_id}`);
    seen.add(job.job_id);
  });
}
