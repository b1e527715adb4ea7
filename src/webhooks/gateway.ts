/**
 * WebhookGateway: the webhook ingress, a Bun.serve of its own on `bind_address` (separate from
 * the main app, so a flood of alerts never queues behind model traffic, and it stays a plain
 * fetch handler with a Map lookup per request).
 *
 * Per request, in this order: 404 unknown path; 405 (with Allow) for anything but POST; 413 when
 * Content-Length is over max_body_bytes; what the headers alone decide (bearer, api-key; a missing
 * signature header, a stale timestamp) -> 401; the body is read up to the limit (413 also for
 * chunked bodies); HMAC or Standard Webhooks signature over it -> 401; durable
 * append to the outbox -> 202 {"status":"accepted","job_id","call_id"}, unless the sender's
 * connection closed before the commit (Bun closes one on which a request is pipelined behind a
 * pending one, answering neither): then nothing is stored, since the sender, told nothing, sends
 * it again. The 202 is written in the same turn as the commit. If the outbox cannot be
 * written, or its undelivered calls already hold max_pending_bytes, the answer is 503 with
 * Retry-After, because senders such as Alertmanager retry only 5xx. The body is stored exactly as
 * received. `GET /webhooks/health` answers `ok`, and the pull API for external runners lives
 * under /webhooks/jobs/ when a pull_token is configured.
 */
import type { Server } from "bun";
import type { WebhooksConfig, WebhookEndpointConfig } from "../config/webhooks-schema";
import { createVerifier, dedupeHeaderOf, type Verifier } from "./auth";
import { HEALTH_PATH, PULL_PREFIX } from "./config";
import { AppendWithdrawnError, OutboxFullError, type Outbox } from "./outbox";
import { WebhookProducer, type ProducerOptions } from "./producer";
import { createPullApi } from "./pull-api";
import { storedHeaders } from "./headers";
import { parseAddress, stopWithin } from "../listen";
import { BodyBudget, declaredLength, UNCOUNTED_BODY_BYTES } from "../body";
import { nextRequestId } from "../requests/meta";
import { rawPath } from "../requests/url";

export interface GatewayOptions {
  config: WebhooksConfig;
  outbox: Outbox;
  serviceId: number;
  log?: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
}

interface Route {
  endpoint: WebhookEndpointConfig;
  verifier: Verifier;
  name: string | null;
  dedupeHeader: string | null;
}

const JSON_HEADERS = { "content-type": "application/json" };

/** `response` with the x-request-id `id`, as every answer of the gateway's servers has. */
function identified(response: Response, id: string): Response {
  response.headers.set("x-request-id", id);
  return response;
}

function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { ...JSON_HEADERS, ...headers } });
}

export class WebhookGateway {
  // Replaced whole by reconfigure(); a request reads each once, before its first await.
  private routes = new Map<string, Route>();
  private pull: ((request: Request, path: string) => Promise<Response>) | null = null;
  private server: Server<undefined> | null = null;
  private retryAfter = "";
  /** When a full outbox was last logged: once a minute at most, however many requests it refuses. */
  private fullLoggedAt = -Infinity;
  private maxBody = 0;
  private budget = new BodyBudget(0);

  constructor(private readonly options: GatewayOptions) {
    this.reconfigure(options.config);
  }

  /**
   * Serves the endpoints, pull token and limits of `config` from the next request on (a reload);
   * requests under way finish with those they began with. bind_address is the one given at start.
   */
  reconfigure(config: WebhooksConfig): void {
    const routes = new Map<string, Route>();
    for (const endpoint of config.endpoints) {
      routes.set(endpoint.path, {
        endpoint,
        verifier: createVerifier(endpoint, { now: this.options.outbox.now }),
        name: endpoint.name ?? null,
        dedupeHeader: dedupeHeaderOf(endpoint),
      });
    }
    this.routes = routes;
    this.pull = config.pull_token ? createPullApi(this.options.outbox, config.pull_token) : null;
    this.retryAfter = String(config.retry_after_s);
    this.maxBody = config.max_body_bytes;
    this.budget = new BodyBudget(config.max_body_bytes_in_flight);
  }

  get port(): number | null {
    return this.server?.port ?? null;
  }

  /** Listens on `bind_address` (or an explicit address, e.g. port 0 in tests). */
  start(address: { hostname: string; port: number } = parseAddress(this.options.config.bind_address)): number {
    this.server = Bun.serve({
      hostname: address.hostname,
      port: address.port,
      // Bun's own cap would answer 413 without a body; ours refuses by Content-Length before reading
      // and counts a chunked body as it arrives, so Bun's is put out of reach.
      maxRequestBodySize: Number.MAX_SAFE_INTEGER,
      idleTimeout: 60,
      fetch: (request) => this.fetch(request),
      error: () => identified(this.unavailable(), nextRequestId()),
    });
    return this.server.port!;
  }

  /** Stops accepting, lets in-flight requests finish (up to `graceMs`, then cuts them), then commits whatever is queued. */
  async stop(graceMs = 10_000): Promise<void> {
    const server = this.server;
    this.server = null;
    if (server) await stopWithin(server, graceMs);
    this.options.outbox.flush();
  }

  producer(options: ProducerOptions = {}): WebhookProducer {
    return new WebhookProducer(this.options.outbox, options);
  }

  /**
   * The whole ingress as a fetch handler (also how the in-process tests drive it). Every answer
   * carries an x-request-id, made first so that the log lines of its request carry it too.
   */
  fetch = async (request: Request): Promise<Response> => {
    const id = nextRequestId();
    return identified(await this.answer(request, id), id);
  };

  private answer = async (request: Request, id: string): Promise<Response> => {
    const path = rawPath(request.url);
    const route = this.routes.get(path);
    if (route === undefined) return this.other(request, path);
    if (request.method !== "POST") return json(405, { error: "method_not_allowed" }, { allow: "POST" });
    const { maxBody, budget } = this;
    const declared = request.headers.get("content-length");
    if (declared !== null && Number(declared) > maxBody) return this.tooLarge();
    const { verifier } = route;
    const early = verifier.refusal(request.headers, null);
    if (early !== null) return this.unauthorized(path, early, id);
    let body: Uint8Array | null;
    try {
      body = await readBody(request, maxBody, budget);
    } catch (error) {
      return error === BUSY ? this.unavailable({ connection: "close" }) : json(400, { error: "bad_request" });
    }
    if (body === null) return this.tooLarge();
    const refusal = verifier.needsBody ? verifier.refusal(request.headers, body) : null;
    if (refusal !== null) return this.unauthorized(path, refusal, id);
    return this.accept(route, request, body, id);
  };

  private async accept(route: Route, request: Request, body: Uint8Array, id: string): Promise<Response> {
    const { endpoint } = route;
    const delivery = route.dedupeHeader === null ? null : request.headers.get(route.dedupeHeader);
    try {
      const result = await this.options.outbox.append(
        {
          jobId: endpoint.job_id,
          serviceId: this.options.serviceId,
          path: endpoint.path,
          name: route.name,
          body,
          contentType: request.headers.get("content-type"),
          headers: storedHeaders(request.headers),
          dedupeKey: delivery ? `${endpoint.path}\u0000${delivery}` : null,
        },
        { withdrawn: () => request.signal.aborted },
      );
      return json(202, { status: "accepted", job_id: endpoint.job_id, call_id: result.callId });
    } catch (error) {
      if (error instanceof AppendWithdrawnError) return json(499, { error: "client_closed" });
      if (!(error instanceof OutboxFullError)) {
        this.options.log?.("error", "webhook outbox unavailable; answering 503", {
          request_id: id,
          path: endpoint.path,
          error: String((error as Error)?.message ?? error),
        });
      } else if (Date.now() - this.fullLoggedAt >= 60_000) {
        this.fullLoggedAt = Date.now();
        this.options.log?.("warn", "webhook outbox full; answering 503 until runners catch up", { request_id: id, path: endpoint.path, reason: error.message });
      }
      return this.unavailable();
    }
  }

  private other(request: Request, path: string): Promise<Response> | Response {
    if (path === HEALTH_PATH) {
      if (request.method === "GET" || request.method === "HEAD") {
        return new Response("ok", { headers: { "content-type": "text/plain; charset=utf-8" } });
      }
      return json(405, { error: "method_not_allowed" }, { allow: "GET, HEAD" });
    }
    if (this.pull !== null && path.startsWith(PULL_PREFIX)) return this.pull(request, path);
    return json(404, { error: "not_found" });
  }

  /** 401, and why in the log (as the API's request lines, at info: a stranger's requests are no warning). */
  private unauthorized(path: string, reason: string, id: string): Response {
    this.options.log?.("info", "webhook request refused: 401", { request_id: id, path, reason });
    return json(401, { error: "unauthorized" });
  }

  /** 503 with Retry-After: senders such as Alertmanager retry only 5xx. */
  private unavailable(headers: Record<string, string> = {}): Response {
    return json(503, { error: "unavailable" }, { "retry-after": this.retryAfter, ...headers });
  }

  /** The rest of the body is not read: the connection closes after the answer (see src/body.ts). */
  private tooLarge(): Response {
    return json(413, { error: "payload_too_large", limit: this.maxBody }, { connection: "close" });
  }
}

/** Thrown by readBody when the next piece of a body would pass max_body_bytes_in_flight. */
const BUSY = new Error("webhook bodies in flight");

/**
 * The raw body, or null once it exceeds `limit` bytes. Up to UNCOUNTED_BODY_BYTES declared, read
 * whole; a larger or chunked one is counted against `budget` as it arrives (never as declared: an
 * idle socket declaring a large body must hold nothing), so many slow senders cannot fill memory
 * before any of their signatures is checked.
 */
async function readBody(request: Request, limit: number, budget: BodyBudget): Promise<Uint8Array | null> {
  if (declaredLength(request) <= UNCOUNTED_BODY_BYTES) {
    const bytes = new Uint8Array(await request.arrayBuffer());
    return bytes.byteLength > limit ? null : bytes;
  }
  if (request.body === null) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
      if (size + chunk.byteLength > limit) return null;
      if (!budget.take(chunk.byteLength)) throw BUSY;
      size += chunk.byteLength;
      chunks.push(chunk);
    }
  } finally {
    budget.give(size);
  }
  return chunks.length === 1 ? chunks[0] : new Uint8Array(Buffer.concat(chunks));
}
