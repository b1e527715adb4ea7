/**
 * Loads the config once at start-up: TOML through smol-toml, `env:VAR` secrets resolved, defaults
 * filled and the result checked against the schema. Every failure is a ConfigError whose message
 * names the key path and the reason (`models[2].targets[0].upstream: no upstream named "olama"`).
 * The database commands read only the data directory (loadDataDir).
 */
import { parseProxyEntry } from "../client-address";
import { redactedUrl } from "./redact";
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { Value } from "@sinclair/typebox/value";
import { ValueErrorType } from "@sinclair/typebox/errors";
import { ConfigSchema, type Config } from "./schema";
import { shapeMistake } from "./shape";
import { readConfigText } from "./text-file";
import { resolveEnv, resolveSecrets, type Secrets } from "./secrets";
import { ConfigError, UnsetVariableError } from "./errors";
import { checkWebhooks, mergeWebhooksFile, namingWebhooksFile } from "../webhooks/config";
import { parseAddress, urlWhereListening } from "../listen";
import { isCorsOrigin } from "../cors";

export { ConfigError } from "./errors";

export interface LoadedConfig {
  config: Config;
  /** The file read, or null for the embedded defaults. */
  source: string | null;
  /** Key paths whose values are secrets (given as env: or under a secret key name). */
  secretPaths: Set<string>;
  /** Those values, for redacting them from text the gateway did not write (a job's stderr). */
  secretValues: Set<string>;
  /** The environment variables read through env:, kept from `[[jobs]]` commands. */
  secretEnv: Set<string>;
  /** server.public_url was not written: links follow where the server listens. */
  linksFollowListen: boolean;
}

export function findConfigFile(flag: string | undefined, env = process.env): string | null {
  // `--config "$CFG"` with CFG unset must not quietly fall back to another file or the defaults.
  if (flag === "") throw new ConfigError("--config: the path is empty");
  if (flag) return flag;
  if (env.MODELGATE_CONFIG) return env.MODELGATE_CONFIG;
  return existsSync("modelgate.toml") ? "modelgate.toml" : null;
}

/** The config `serve` runs: every `env:` variable must be set. */
export function loadConfig(file: string | null, env = process.env): LoadedConfig {
  return buildConfig(readConfigFile(file), { env, baseDir: baseDirOf(file), source: file });
}

/**
 * The data directory, for the commands that work on the database alone (user, key, credits, jobs,
 * settlements, migrate). The file is checked as for `serve` when every `env:` variable it names is
 * set. An operator's shell often lacks the server's environment (the secrets, URLs that carry
 * keys), and these commands read none of it: then only data_dir is read, and must resolve.
 */
export function loadDataDir(file: string | null, env = process.env): string {
  const raw = readConfigFile(file);
  try {
    return buildConfig(raw, { env, baseDir: baseDirOf(file), source: file }).config.server.data_dir;
  } catch (err) {
    // An unset variable of data_dir's own is named alone below; the others do not matter here.
    if (!(err instanceof UnsetVariableError)) throw err;
  }
  const server = raw.server;
  const written = server !== null && typeof server === "object" ? (server as Record<string, unknown>).data_dir : undefined;
  const dataDir = resolveEnv(written ?? ConfigSchema.properties.server.properties.data_dir.default, "server.data_dir", env);
  if (typeof dataDir !== "string" || dataDir === "") throw new ConfigError("server.data_dir: expected a directory path");
  checkDataDir(dataDir);
  return dataDir;
}

/**
 * `:memory:` opens a database that keeps nothing (the tests' own): a config naming it is a mistake.
 * No directory's name holds a control character; one there (a NUL, a pasted line break) would be
 * echoed raw by every error that names the path.
 */
function checkDataDir(dataDir: string): void {
  if (dataDir === ":memory:") throw new ConfigError('server.data_dir: ":memory:" would keep nothing (users, keys, credits); name a directory');
  if (/\p{Cc}/u.test(dataDir)) throw new ConfigError("server.data_dir: contains a control character (a NUL byte, a line break); name a directory");
}

function baseDirOf(file: string | null): string {
  return file ? dirname(resolve(file)) : process.cwd();
}

function readConfigFile(file: string | null): Record<string, unknown> {
  let raw: Record<string, unknown> = {};
  if (file !== null) {
    raw = parseTomlText(readConfigText(file, file), file);
  }
  return raw;
}

export function parseTomlText(text: string, file: string): Record<string, unknown> {
  try {
    return parseToml(text) as Record<string, unknown>;
  } catch (err) {
    throw invalidToml(file, err);
  }
}

/** `FILE:LINE:COLUMN: invalid TOML: reason`, from a smol-toml error (which carries the place). */
export function invalidToml(file: string, err: unknown): ConfigError {
  const { line, column, message } = err as { line?: unknown; column?: unknown; message?: unknown };
  const at = typeof line === "number" && typeof column === "number" ? `:${line}:${column}` : "";
  const reason = String(message ?? err).split("\n")[0].replace(/^Invalid TOML document: /, "");
  return new ConfigError(`${file}${at}: invalid TOML: ${reason}`);
}

export interface BuildOptions {
  env?: Record<string, string | undefined>;
  baseDir?: string;
  source?: string | null;
}

/** Validates an already-parsed TOML document; the in-process tests use this directly. */
export function buildConfig(raw: Record<string, unknown>, options: BuildOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const merged = mergeWebhooksFile(raw, options.baseDir ?? process.cwd(), env);
  try {
    return checkedConfig(merged, env, options);
  } catch (err) {
    throw namingWebhooksFile(err, merged);
  }
}

function checkedConfig(merged: Record<string, unknown>, env: Record<string, string | undefined>, options: BuildOptions): LoadedConfig {
  const secrets: Secrets = { paths: new Set(), values: new Set(), env: new Set(), unset: [] };
  const resolved = resolveSecrets(merged, "", env, secrets) as Record<string, unknown>;
  if (secrets.unset.length > 0) throw new UnsetVariableError(secrets.unset);
  // Lists written as tables first: checkWebhooks would call `[webhooks.endpoints]` "no endpoint".
  refuseNonArrayLists(resolved);
  checkWebhooks(resolved);
  const mistake = shapeMistake(ConfigSchema, resolved);
  if (mistake !== null) throw new ConfigError(mistake);
  const withDefaults = Value.Default(ConfigSchema, Value.Clone(resolved));
  const firstError = Value.Errors(ConfigSchema, withDefaults).First();
  if (firstError) {
    throw new ConfigError(`${pointerToPath(firstError.path) || "(root)"}: ${describe(firstError)}`);
  }
  const config = withDefaults as Config;
  const server = resolved.server as Record<string, unknown> | undefined;
  checkAddress("server.listen", config.server.listen);
  checkAddress("webhooks.bind_address", config.webhooks.bind_address);
  // Unwritten, links follow listen (a changed port still gets a setup link that opens); a port of
  // 0 is known once the server listens (serve.ts).
  const linksFollowListen = server?.public_url === undefined;
  if (linksFollowListen) config.server.public_url = urlWhereListening(config.server.listen) ?? config.server.public_url;
  checkReferences(config);
  checkSpendAuth(config);
  return { config, source: options.source ?? null, secretPaths: secrets.paths, secretValues: secrets.values, secretEnv: secrets.env, linksFollowListen };
}

/**
 * A list given as something else is refused before defaults are filled: TypeBox's Value.Default
 * would replace a table written `[upstreams]` (instead of `[[upstreams]]`) by the empty default list,
 * silently dropping it.
 */
function refuseNonArrayLists(raw: Record<string, unknown>): void {
  for (const error of Value.Errors(ConfigSchema, raw)) {
    if (error.type !== ValueErrorType.Array || error.value === undefined) continue;
    const path = pointerToPath(error.path);
    const ofTables = (error.schema as { items?: { type?: string } }).items?.type === "object";
    const hint = ofTables && typeof error.value === "object" ? ` (a list of tables is written [[${path}]])` : "";
    throw new ConfigError(`${path}: expected a list${hint}`);
  }
}

/** `/models/2/targets/0/upstream` -> `models[2].targets[0].upstream` */
export function pointerToPath(pointer: string): string {
  return pointer
    .split("/")
    .filter(Boolean)
    .reduce((acc, part) => (/^\d+$/.test(part) ? `${acc}[${part}]` : acc ? `${acc}.${part}` : part), "");
}

function describe(error: { message: string; schema: unknown; value: unknown }): string {
  const schema = error.schema as { anyOf?: { const?: unknown }[] };
  if (schema.anyOf?.every((s) => "const" in s)) {
    return `must be one of ${schema.anyOf.map((s) => JSON.stringify(s.const)).join(", ")}`;
  }
  if (error.message.startsWith("Unexpected property")) return "unknown key";
  return error.message.charAt(0).toLowerCase() + error.message.slice(1);
}

/**
 * A `host:port` to listen on: an IPv4 address, an IPv6 address (in brackets, or bare), a host
 * name, or nothing (every interface), then a port; checked before public_url is built from it.
 */
function checkAddress(path: string, address: string): void {
  const { hostname, port } = parseAddress(address);
  if (port > 65_535) throw new ConfigError(`${path}: port ${port} is out of range (0 to 65535)`);
  const host = address.slice(0, address.lastIndexOf(":"));
  const valid = host === ""
    || (host.startsWith("[") ? host.endsWith("]") && isIP(hostname) === 6
      : /^[\d.]+$/.test(host) ? isIP(host) === 4
      : isIP(host) === 6 || /^[a-z\d_]([a-z\d_.-]{0,251}[a-z\d_.])?$/i.test(host));
  if (!valid) {
    throw new ConfigError(`${path}: "${address.slice(0, 80)}" is not host:port (an IP address, an IPv6 address in brackets or a host name, then a port; no scheme or path), such as 0.0.0.0:8080, [::1]:8080 or :8080`);
  }
}

function checkReferences(config: Config): void {
  checkDataDir(config.server.data_dir);
  for (const section of config.webhooks.enabled ? (["server", "webhooks"] as const) : (["server"] as const)) {
    if (config[section].max_body_bytes_in_flight < config[section].max_body_bytes) {
      throw new ConfigError(`${section}.max_body_bytes_in_flight: must be at least ${section}.max_body_bytes, or one large body could never be read`);
    }
  }
  const publicUrl = URL.parse(config.server.public_url);
  if (publicUrl === null || publicUrl.hostname === "" || publicUrl.href !== `${publicUrl.origin}/` || /\s/.test(config.server.public_url)) {
    throw new ConfigError(`server.public_url: "${redactedUrl(config.server.public_url, { path: false })}" must be the URL of this gateway's origin, such as https://gw.example.com (no path, query or user): OAuth callbacks, setup links and Origin checks are built from it`);
  }
  // URLs the gateway will call: refused here, by key and without echoing them (they may hold a
  // key), rather than by a bare "Invalid URL" at start, or at first use.
  const urls: Array<[string, string | undefined]> = [
    ...config.upstreams.map((u, i): [string, string] => [`upstreams[${i}].base_url`, u.base_url]),
    ["spend_auth.rpc_url", config.spend_auth.rpc_url],
    ...config.jobs.map((j, i): [string, string | undefined] => [`jobs[${i}].forward`, j.forward]),
    ...(["github", "google"] as const).flatMap((provider) =>
      (["authorize_url", "token_url", "api_url"] as const).map((key): [string, string | undefined] => [`auth.${provider}.${key}`, config.auth[provider]?.[key]]),
    ),
  ];
  for (const [path, value] of urls) {
    if (value !== undefined && !/^https?:$/.test(URL.parse(value)?.protocol ?? "")) throw new ConfigError(`${path}: not a valid http(s) URL`);
  }
  config.server.cors_origins.forEach((entry, i) => {
    if (!isCorsOrigin(entry)) throw new ConfigError(`server.cors_origins[${i}]: "${entry.slice(0, 80)}" is not an origin such as https://chat.example.com (scheme, lower-case host and port; no path or trailing slash), nor "*"`);
  });
  config.server.trusted_proxies.forEach((entry, i) => {
    if (parseProxyEntry(entry) === null) throw new ConfigError(`server.trusted_proxies[${i}]: "${entry.slice(0, 80)}" is not an IP address or a CIDR block (such as 10.0.0.0/8 or fd00::/8)`);
  });
  // Tokens a client sends as `Authorization: Bearer …`, which cannot hold a space or a line break:
  // one read with the environment variable's trailing newline would refuse every caller.
  const bearerTokens: Array<[string, string | undefined]> = [["metrics.token", config.metrics.token], ["webhooks.pull_token", config.webhooks.pull_token]];
  for (const [path, token] of bearerTokens) {
    if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
      throw new ConfigError(`${path}: a bearer token must be printable ASCII without spaces or line breaks (a trailing newline in the environment variable?)`);
    }
  }
  const upstreams = new Set<string>();
  config.upstreams.forEach((u, i) => {
    if (upstreams.has(u.name)) throw new ConfigError(`upstreams[${i}].name: duplicate upstream "${u.name}"`);
    if (u.api_key !== undefined && /[\r\n]/.test(u.api_key)) {
      throw new ConfigError(`upstreams[${i}].api_key: contains a line break (a trailing newline in the environment variable?)`);
    }
    upstreams.add(u.name);
  });
  const names = new Set<string>();
  config.models.forEach((m, i) => {
    for (const part of ["prompt", "completion"] as const) {
      // The number the TOML wrote, kept to 6 decimals, must be that same number.
      if (Number(m.price[part].toFixed(6)) !== m.price[part]) {
        throw new ConfigError(`models[${i}].price.${part}: at most 6 decimal places (a millionth of a credit per 1M tokens), so costs stay exact`);
      }
      // Else the price would be listed, logged and counted as spent, but never charged.
      if (m.free && m.price[part] !== 0) throw new ConfigError(`models[${i}].price.${part}: a free model is never charged: remove the price, or remove free = true`);
    }
    for (const name of [m.id, ...m.aliases]) {
      if (names.has(name)) throw new ConfigError(`models[${i}]: model id or alias "${name}" is used twice`);
      names.add(name);
    }
    m.targets.forEach((t, j) => {
      if (!upstreams.has(t.upstream)) {
        throw new ConfigError(`models[${i}].targets[${j}].upstream: no upstream named "${t.upstream}"`);
      }
    });
  });
}

/**
 * What SpendAuth needs of the config, checked here so that `config check` refuses what `serve`
 * would (the operator key's address is checked at start-up, where viem is loaded).
 */
function checkSpendAuth({ spend_auth: s }: Config): void {
  if (s.operator_key !== undefined) {
    if (!s.rpc_url) throw new ConfigError("spend_auth.operator_key: settling on-chain needs spend_auth.rpc_url");
    if (!/^(0x)?[0-9a-fA-F]{64}$/.test(s.operator_key.trim())) throw new ConfigError("spend_auth.operator_key: not a 32-byte hex private key");
  }
  // 0 units a credit would make every priced model free to any authorization, however small.
  if (/^0+$/.test(s.units_per_credit)) throw new ConfigError("spend_auth.units_per_credit: must be at least 1 (0 would make every priced model free)");
  if (!s.rpc_url && s.allowed_signers.length === 0) return;
  if (!s.operator) throw new ConfigError("spend_auth.operator: required when rpc_url or allowed_signers is set");
  if (!s.verifying_contract) throw new ConfigError("spend_auth.verifying_contract: required when rpc_url or allowed_signers is set");
}
