/**
 * Loads the config once at start-up: TOML through smol-toml, the webhooks file merged, `env:VAR`
 * secrets resolved, then one path of checks: the schema (validate.ts: shapes, types, ranges), then
 * what it cannot say (checks.ts: one key against another). Every failure is a ConfigError whose
 * message names the key path and the reason (`models[2].targets[0].upstream: no upstream named "olama"`).
 * The database commands read only the data directory (loadDataDir).
 */
import { existsSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { parse as parseToml } from "smol-toml";
import { Value } from "@sinclair/typebox/value";
import { ConfigSchema, type Config } from "./schema";
import { checkSchema, checkWritten } from "./validate";
import { readConfigText } from "./text-file";
import { resolveEnv, resolveSecrets, type Secrets } from "./secrets";
import { ConfigError, UnsetVariableError, invalidToml } from "./errors";
import { mergeWebhooksFile } from "../webhooks/config";
import { urlWhereListening } from "../listen";
import { checkConfig, checkDataDir, checkListen } from "./checks";

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
 * `[database] url` for the same commands, read as loadDataDir reads data_dir: from the whole
 * config when every variable it names is set, else alone (its own `env:` variable must be).
 * Undefined when the config names none (SQLite in data_dir).
 */
export function loadDatabaseUrl(file: string | null, env = process.env): string | undefined {
  const raw = readConfigFile(file);
  const database = raw.database !== null && typeof raw.database === "object" ? (raw.database as Record<string, unknown>) : {};
  if (database.url === undefined) return undefined;
  try {
    return buildConfig(raw, { env, baseDir: baseDirOf(file), source: file }).config.database.url;
  } catch (err) {
    if (!(err instanceof UnsetVariableError)) throw err;
  }
  const url = resolveEnv(database.url, "database.url", env);
  if (typeof url !== "string" || !/^postgres(ql)?:\/\//.test(url)) throw new ConfigError("database.url: expected a postgres:// or postgresql:// URL");
  return url;
}

function baseDirOf(file: string | null): string {
  return file ? dirname(resolve(file)) : process.cwd();
}

/** The file's TOML as written, unchecked (`{}` without a file): for what a command only reports. */
export function readConfigFile(file: string | null): Record<string, unknown> {
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

export interface BuildOptions {
  env?: Record<string, string | undefined>;
  baseDir?: string;
  source?: string | null;
}

/** Validates an already-parsed TOML document; the in-process tests use this directly. */
export function buildConfig(raw: Record<string, unknown>, options: BuildOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const baseDir = options.baseDir ?? process.cwd();
  const { raw: merged, names } = mergeWebhooksFile(raw, baseDir, env);
  const secrets: Secrets = { paths: new Set(), values: new Set(), env: new Set(), unset: [] };
  const resolved = resolveSecrets(merged, "", env, secrets);
  if (secrets.unset.length > 0) throw new UnsetVariableError(secrets.unset.map((u) => ({ ...u, path: names.say(u.path) })));
  checkWritten(ConfigSchema, resolved, names);
  const config = Value.Default(ConfigSchema, Value.Clone(resolved)) as Config;
  checkSchema(ConfigSchema, config, names);
  checkListen(config, names);
  // Unwritten, links follow listen (a changed port still gets a setup link that opens); a port of
  // 0 is known once the server listens, and the config it serves follows it (servedConfig, reload.ts).
  const server = (resolved as Record<string, unknown>).server as Record<string, unknown> | undefined;
  const linksFollowListen = server?.public_url === undefined;
  if (linksFollowListen && config.server.listen.includes("%")) {
    throw new ConfigError(`server.public_url: required when server.listen names an IPv6 zone ("${config.server.listen.slice(0, 80)}"): a URL cannot carry one`);
  }
  if (linksFollowListen) config.server.public_url = urlWhereListening(config.server.listen) ?? config.server.public_url;
  checkConfig(config, { names, baseDir });
  return { config, source: options.source ?? null, secretPaths: secrets.paths, secretValues: secrets.values, secretEnv: secrets.env, linksFollowListen };
}
