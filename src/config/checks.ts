/**
 * What the schema cannot say, checked on the config it passed: addresses to listen on, the data
 * directory, URLs the gateway will call, origins, tokens, names and references between upstreams
 * and models, what SpendAuth needs, and the webhook section's own rules (src/webhooks/config.ts).
 * Each failure is a ConfigError naming the key.
 */
import { isIP } from "node:net";
import { parseProxyEntry } from "../client-address";
import { isCorsOrigin } from "../cors";
import { parseAddress } from "../listen";
import { checkWebhooks } from "../webhooks/config";
import { ConfigError, type KeyNames } from "./errors";
import { redactedUrl } from "./redact";
import type { Config } from "./schema";

/**
 * `:memory:` opens a database that keeps nothing (the tests' own): a config naming it is a mistake.
 * No directory's name holds a control character; one there (a NUL, a pasted line break) would be
 * echoed raw by every error that names the path.
 */
export function checkDataDir(dataDir: string): void {
  if (dataDir === ":memory:") throw new ConfigError('server.data_dir: ":memory:" would keep nothing (users, keys, credits); name a directory');
  if (/\p{Cc}/u.test(dataDir)) throw new ConfigError("server.data_dir: contains a control character (a NUL byte, a line break); name a directory");
}

/** The addresses the API and the webhook gateway listen on: first, as public_url may be built from listen. */
export function checkListen(config: Config, names: KeyNames): void {
  checkAddress("server.listen", config.server.listen);
  checkAddress(names.say("webhooks.bind_address"), config.webhooks.bind_address);
}

/** Everything else, after checkListen and once public_url is settled. `baseDir`: where a `file:` prompt is read from. */
export function checkConfig(config: Config, options: { names: KeyNames; baseDir: string }): void {
  checkReferences(config, options.names);
  checkSpendAuth(config);
  checkWebhooks(config, options);
}

/**
 * A `host:port` to listen on: an IPv4 address, an IPv6 address (in brackets, or bare), a host
 * name, or nothing (every interface), then a port; checked before public_url is built from it.
 */
function checkAddress(path: string, address: string): void {
  const { hostname, port } = parseAddress(address);
  if (!/:[0-9]{1,5}$/.test(address)) throw notAnAddress(path, address);
  if (port > 65_535) throw new ConfigError(`${path}: port ${port} is out of range (0 to 65535)`);
  const host = address.slice(0, address.lastIndexOf(":"));
  const valid =
    host === "" ||
    (host.startsWith("[")
      ? host.endsWith("]") && isIP(hostname) === 6
      : /^[\d.]+$/.test(host)
        ? isIP(host) === 4
        : isIP(host) === 6 || /^[a-z\d_]([a-z\d_.-]{0,251}[a-z\d_.])?$/i.test(host));
  if (!valid) throw notAnAddress(path, address);
}

/** Whether two listen hosts take some address in common: `::` takes every one (dual stack), `0.0.0.0` every IPv4 one. */
function sameAddresses(a: string, b: string): boolean {
  if (a === b || a === "::" || b === "::") return true;
  return (a === "0.0.0.0" && isIP(b) === 4) || (b === "0.0.0.0" && isIP(a) === 4);
}

function notAnAddress(path: string, address: string): ConfigError {
  return new ConfigError(
    `${path}: "${address.slice(0, 80)}" is not host:port (an IP address, an IPv6 address in brackets or a host name, then a port; no scheme or path), such as 0.0.0.0:8080, [::1]:8080 or :8080`,
  );
}

function checkReferences(config: Config, names: KeyNames): void {
  checkDataDir(config.server.data_dir);
  if (config.webhooks.enabled) {
    // Two servers on one port: `config check` would pass what `serve` then fails to start.
    const api = parseAddress(config.server.listen);
    const hooks = parseAddress(config.webhooks.bind_address);
    if (api.port !== 0 && api.port === hooks.port && sameAddresses(api.hostname, hooks.hostname)) {
      throw new ConfigError(
        `${names.say("webhooks.bind_address")}: "${config.webhooks.bind_address}" is where server.listen ("${config.server.listen}") is: give the webhook gateway a port of its own`,
      );
    }
  }
  for (const section of config.webhooks.enabled ? (["server", "webhooks"] as const) : (["server"] as const)) {
    if (config[section].max_body_bytes_in_flight < config[section].max_body_bytes) {
      throw new ConfigError(
        `${names.say(`${section}.max_body_bytes_in_flight`)}: must be at least ${names.say(`${section}.max_body_bytes`)}, or one large body could never be read`,
      );
    }
  }
  const publicUrl = URL.parse(config.server.public_url);
  if (publicUrl === null || publicUrl.hostname === "" || publicUrl.href !== `${publicUrl.origin}/` || /\s/.test(config.server.public_url)) {
    throw new ConfigError(
      `server.public_url: "${redactedUrl(config.server.public_url, { path: false })}" must be the URL of this gateway's origin, such as https://gw.example.com (no path, query or user): OAuth callbacks, setup links and Origin checks are built from it`,
    );
  }
  // URLs the gateway will call: refused here, by key and without echoing them (they may hold a
  // key), rather than by a bare "Invalid URL" at start, or at first use.
  const urls: Array<[string, string | undefined]> = [
    ...config.upstreams.map((u, i): [string, string] => [`upstreams[${i}].base_url`, u.base_url]),
    ["spend_auth.rpc_url", config.spend_auth.rpc_url],
    ...config.jobs.map((j, i): [string, string | undefined] => [`jobs[${i}].forward`, j.forward]),
    ...(["github", "google"] as const).flatMap((provider) =>
      (["authorize_url", "token_url", "api_url"] as const).map((key): [string, string | undefined] => [
        `auth.${provider}.${key}`,
        config.auth[provider]?.[key],
      ]),
    ),
  ];
  for (const [path, value] of urls) {
    if (value !== undefined && !/^https?:$/.test(URL.parse(value)?.protocol ?? "")) throw new ConfigError(`${path}: not a valid http(s) URL`);
  }
  config.server.cors_origins.forEach((entry, i) => {
    if (!isCorsOrigin(entry))
      throw new ConfigError(
        `server.cors_origins[${i}]: "${entry.slice(0, 80)}" is not an origin such as https://chat.example.com (scheme, lower-case host and port; no path or trailing slash), nor "*"`,
      );
  });
  config.server.trusted_proxies.forEach((entry, i) => {
    if (parseProxyEntry(entry) === null)
      throw new ConfigError(`server.trusted_proxies[${i}]: "${entry.slice(0, 80)}" is not an IP address or a CIDR block (such as 10.0.0.0/8 or fd00::/8)`);
  });
  // Tokens a client sends as `Authorization: Bearer …`, which cannot hold a space or a line break:
  // one read with the environment variable's trailing newline would refuse every caller.
  const bearerTokens: Array<[string, string | undefined]> = [
    ["metrics.token", config.metrics.token],
    [names.say("webhooks.pull_token"), config.webhooks.pull_token],
  ];
  for (const [path, token] of bearerTokens) {
    if (token !== undefined && !/^[\x21-\x7e]+$/.test(token)) {
      throw new ConfigError(`${path}: a bearer token must be printable ASCII without spaces or line breaks (a trailing newline in the environment variable?)`);
    }
  }
  // A domain sign-up nobody could pass is a mistake, not a policy: `closed` says that.
  if (config.auth.signup === "domain" && config.auth.allowed_domains.length === 0) {
    throw new ConfigError('auth.allowed_domains: signup = "domain" needs at least one domain (or signup = "closed" to let no one sign up)');
  }
  config.auth.allowed_domains.forEach((entry, i) => {
    // Compared with the domain of an address, so a pattern or URL (`*.example.com`, `https://…`) matches nothing.
    if (!/^[\p{L}\p{N}\p{M}_-]+(\.[\p{L}\p{N}\p{M}_-]+)+$/u.test(entry.normalize("NFKC").trim().replace(/^@/, ""))) {
      throw new ConfigError(
        `auth.allowed_domains[${i}]: "${entry.slice(0, 80)}" is not a domain such as example.com (no wildcard, scheme or path; a subdomain is listed on its own)`,
      );
    }
  });
  const upstreams = new Set<string>();
  config.upstreams.forEach((u, i) => {
    if (upstreams.has(u.name)) throw new ConfigError(`upstreams[${i}].name: duplicate upstream "${u.name}"`);
    if (u.api_key !== undefined && /[\r\n]/.test(u.api_key)) {
      throw new ConfigError(`upstreams[${i}].api_key: contains a line break (a trailing newline in the environment variable?)`);
    }
    upstreams.add(u.name);
  });
  const modelNames = new Set<string>();
  config.models.forEach((m, i) => {
    for (const part of ["prompt", "completion", "request"] as const) {
      // The number the TOML wrote, kept to 6 decimals, must be that same number.
      if (Number(m.price[part].toFixed(6)) !== m.price[part]) {
        throw new ConfigError(`models[${i}].price.${part}: at most 6 decimal places (a millionth of a credit), so costs stay exact`);
      }
      // Else the price would be listed, logged and counted as spent, but never charged.
      if (m.free && m.price[part] !== 0)
        throw new ConfigError(`models[${i}].price.${part}: a free model is never charged: remove the price, or remove free = true`);
    }
    for (const name of [m.id, ...m.aliases]) {
      if (modelNames.has(name)) throw new ConfigError(`models[${i}]: model id or alias "${name}" is used twice`);
      modelNames.add(name);
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
