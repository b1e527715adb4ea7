/**
 * One configured upstream as the router holds it (UpstreamState): its URLs, the request head and
 * credentials each request is sent with, the forms of those credentials taken out of whatever the
 * upstream says, the client that carries its requests, and the circuit and counters of its health
 * (./circuit.ts, ./upstream-health.ts).
 */
import type { UpstreamConfig } from "../config/schema";
import { MIN_REDACTED, percentDecoded, urlSecretParts } from "../config/secrets";
import { VERSION } from "../version";
import { closedCircuit, type Circuit } from "./circuit";
import type { UpstreamExchange } from "./exchange";
import { fetchPost, USES_PROXY } from "./fetch-exchange";
import { http1Post } from "./http1";
import { createPost, endpointUrl, type UpstreamPost } from "./upstream-post";

export interface UpstreamState extends Circuit {
  name: string;
  config: UpstreamConfig;
  /** base_url's path + `/chat/completions` (its query kept), computed once. */
  chatUrl: string;
  modelsUrl: string;
  /** host and port for the connect check of a cold upstream. */
  hostname: string;
  port: number;
  /** The upstream's credential as sent (Authorization, or x-api-key), for requests made apart from chat's (discovery). */
  credentials: Readonly<Record<string, string>>;
  /** The credentials sent with each request, longest first: taken out of what the upstream says (upstreamSecrets). */
  secrets: readonly string[];
  /** Sends one chat request body (JSON text) to this upstream; see ./exchange.ts. */
  postChat: (body: string) => UpstreamExchange;
  /**
   * Sends one request to `path` under base_url: JSON text by the same client as chat, or a
   * stream (an upload, with the client's Content-Type) through fetch, which streams a request body.
   */
  post: UpstreamPost;
  /** postChat goes through fetch, which has no connect timeout of its own (./connect.ts). */
  viaFetch: boolean;
  lastError: string | null;
  lastSuccessAt: number | null;
  lastFailureAt: number | null;
  /** Last time the upstream answered at all (any HTTP status): its connections are warm. */
  lastContactAt: number | null;
  /** Moving average of time to first byte over every model, ms (status and metrics; least-latency reads the target's). */
  ttfbEwmaMs: number | null;
  /** Attempts whose answer arrived whole / that failed, since start (a client that left: neither). */
  successes: number;
  failures: number;
}

export function createUpstreamState(config: UpstreamConfig): UpstreamState {
  const base = new URL(config.base_url);
  const chatUrl = endpointUrl(base, "chat/completions");
  const hostname = chatUrl.hostname.replace(/^\[(.*)\]$/, "$1");
  const port = chatUrl.port ? Number(chatUrl.port) : chatUrl.protocol === "https:" ? 443 : 80;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "user-agent": `modelgate/${VERSION}`,
  };
  const credentials: Record<string, string> = {};
  if (config.api_key && config.api_key_header === "x-api-key") credentials["x-api-key"] = config.api_key;
  else {
    const authorization = config.api_key ? `Bearer ${config.api_key}` : basicAuthorization(base);
    if (authorization) credentials.authorization = authorization;
  }
  Object.assign(headers, credentials);
  const viaFetch = chatUrl.protocol !== "http:" || USES_PROXY;
  const origin = {
    hostname,
    port,
    name: config.name,
    connectTimeoutMs: config.connect_timeout_ms,
    maxConnections: config.max_connections,
    // The gateway's own client does not decode gzip: it asks for none (fetch decodes by itself).
    requestHead: `POST ${chatUrl.pathname}${chatUrl.search} HTTP/1.1\r\nhost: ${chatUrl.host}\r\naccept-encoding: identity\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join("")}`,
  };
  const postChat = viaFetch ? (body: string) => fetchPost(config.name, chatUrl.href, headers, body) : (body: string) => http1Post(origin, body);
  const post = createPost({ name: config.name, base, headers, origin, viaFetch, postChat });
  return {
    name: config.name,
    config,
    chatUrl: chatUrl.href,
    modelsUrl: endpointUrl(base, "models").href,
    hostname,
    port,
    credentials,
    secrets: upstreamSecrets(config.api_key, base, credentials.authorization ?? null),
    postChat,
    post,
    viaFetch,
    ...closedCircuit(),
    lastError: null,
    lastSuccessAt: null,
    lastFailureAt: null,
    lastContactAt: null,
    ttfbEwmaMs: null,
    successes: 0,
    failures: 0,
  };
}

/**
 * Every form in which an upstream could echo what the gateway sends it that is secret: api_key,
 * the Basic header's base64 of user and password, and what urlSecretParts finds in base_url (its
 * password, its query whole and the values of parameters named as credentials, as typed and
 * decoded). Other values (`api-version=2024-06-01`) are left in what the upstream says: taken out,
 * they would garble its messages.
 */
function upstreamSecrets(apiKey: string | undefined, base: URL, authorization: string | null): string[] {
  const secrets = [apiKey, ...urlSecretParts(base, { path: false })];
  if (authorization?.startsWith("Basic ")) secrets.push(authorization.slice(6));
  return [...new Set(secrets.filter((s): s is string => s !== undefined && s.length >= MIN_REDACTED))].sort((a, b) => b.length - a.length);
}

/** `Authorization: Basic` from base_url's user and password (a server behind a proxy's basic auth); null without them. */
function basicAuthorization(base: URL): string | null {
  if (base.username === "" && base.password === "") return null;
  const pair = `${percentDecoded(base.username)}:${percentDecoded(base.password)}`;
  return `Basic ${Buffer.from(pair, "utf8").toString("base64")}`;
}
