/**
 * Per-upstream health, and the circuit breaker that upstreams and route targets each have
 * (./target-state.ts decides which one a failure counts against). A circuit that fails
 * `cooldown_failures` times in a row is skipped until its cooldown ends; then exactly one request
 * probes it (half-open), a success readmits it and a failure opens it again for another cooldown.
 * Time comes from the caller, so tests never sleep. Counters live on the state objects themselves
 * (no allocation per request); /metrics and /api/status read them when asked.
 */
import type { UpstreamConfig } from "../config/schema";
import { MIN_REDACTED, percentDecoded, urlSecretParts } from "../config/secrets";
import { VERSION } from "../version";
import { http1Post } from "./http1";
import { createPost, endpointUrl, type UpstreamPost } from "./upstream-post";
import { fetchPost, USES_PROXY, type UpstreamExchange } from "./upstream-client";

export type CircuitState = "closed" | "open" | "half-open";

/**
 * A circuit breaker's state: each upstream has one (it cannot be reached), and each route target
 * has its own (the upstream answers that model with 429 or 5xx: ./target-state.ts).
 */
export interface Circuit {
  consecutiveFailures: number;
  cooldownUntil: number;
  /** A half-open probe is in flight; no other request may use this upstream until it ends. */
  probing: boolean;
  /** Times the circuit opened, since start. */
  opened: number;
}

export function closedCircuit(): Circuit {
  return { consecutiveFailures: 0, cooldownUntil: 0, probing: false, opened: 0 };
}

/** When a circuit opens and for how long (the `[routing]` keys). */
export type CircuitPolicy = { cooldown_failures: number; cooldown_ms: number };

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
  /** Sends one chat request body (JSON text) to this upstream; see ./upstream-client.ts. */
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

export function circuitState(c: Circuit, now: number): CircuitState {
  if (c.cooldownUntil === 0) return "closed";
  return now < c.cooldownUntil ? "open" : "half-open";
}

/** May a request go through this circuit now? Half-open admits one probe at a time. */
export function isAvailable(c: Circuit, now: number): boolean {
  const state = circuitState(c, now);
  if (state === "closed") return true;
  if (state === "open") return false;
  return !c.probing;
}

/** Marks the start of an attempt; a half-open circuit becomes "probing" until the attempt ends. */
export function beginAttempt(c: Circuit, now: number): void {
  if (c.cooldownUntil !== 0 && now >= c.cooldownUntil) c.probing = true;
}

/** An attempt ended without a verdict (the client went away): release a probe, count nothing. */
export function abandonAttempt(c: Circuit): void {
  c.probing = false;
}

/**
 * The upstream answered (status and headers): it is reachable, so an open circuit closes and a
 * probe ends. Whether the answer is whole is known later (recordComplete, or recordFailure when
 * it breaks off), so the run of failures is not ended here: a stream that always breaks after
 * its headers still opens the circuit after cooldown_failures.
 */
export function recordAnswered(u: UpstreamState, ttfbMs: number): void {
  closeCircuit(u);
  u.ttfbEwmaMs = nextTtfbAverage(u.ttfbEwmaMs, ttfbMs);
}

/** A moving average of time to first byte (EWMA, α = 0.2) after one more answer; the first answer starts it. */
export function nextTtfbAverage(average: number | null, ttfbMs: number): number {
  return average === null ? ttfbMs : average * 0.8 + ttfbMs * 0.2;
}

/** The answer arrived whole: a successful attempt, and the end of any run of failures. */
export function recordComplete(u: UpstreamState, now: number): void {
  u.consecutiveFailures = 0;
  u.lastSuccessAt = now;
  u.successes += 1;
}

/** An answer came through it: an open circuit closes and a probe ends; the run of failures stays. */
export function closeCircuit(c: Circuit): void {
  c.cooldownUntil = 0;
  c.probing = false;
}

export function recordFailure(u: UpstreamState, now: number, reason: string, policy: CircuitPolicy): void {
  noteFailure(u, now, reason);
  countFailure(u, now, policy);
}

/** A failed attempt in the upstream's counters and status, whichever circuit it counts against. */
export function noteFailure(u: UpstreamState, now: number, reason: string): void {
  u.failures += 1;
  u.lastError = reason;
  u.lastFailureAt = now;
}

/** One more failure in a row: the circuit opens at the threshold, and a failed probe re-opens it at once. */
export function countFailure(c: Circuit, now: number, policy: CircuitPolicy): void {
  c.consecutiveFailures += 1;
  c.probing = false;
  if (c.consecutiveFailures >= policy.cooldown_failures || c.cooldownUntil !== 0) {
    if (c.cooldownUntil === 0 || now >= c.cooldownUntil) c.opened += 1;
    c.cooldownUntil = now + policy.cooldown_ms;
  }
}

export interface UpstreamHealth {
  name: string;
  state: CircuitState;
  healthy: boolean;
  consecutive_failures: number;
  /** Epoch ms when an open circuit lets a probe through; null when closed. */
  cooldown_until: number | null;
  last_error: string | null;
  last_success_at: number | null;
  last_failure_at: number | null;
  ttfb_ms: number | null;
}

export function upstreamHealth(u: UpstreamState, now: number): UpstreamHealth {
  return {
    name: u.name,
    state: circuitState(u, now),
    healthy: u.consecutiveFailures === 0,
    consecutive_failures: u.consecutiveFailures,
    cooldown_until: u.cooldownUntil === 0 ? null : u.cooldownUntil,
    last_error: u.lastError,
    last_success_at: u.lastSuccessAt,
    last_failure_at: u.lastFailureAt,
    ttfb_ms: u.ttfbEwmaMs === null ? null : Math.round(u.ttfbEwmaMs * 10) / 10,
  };
}
