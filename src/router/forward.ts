/**
 * Sends one chat request to a route's targets until one answers. Connection errors, timeouts, 429
 * and 5xx move on to the next target at once; when every target has been tried and attempts
 * remain (`max_attempts`), targets are tried again after an exponential backoff, except those that
 * timed out (a timeout is too expensive to repeat). All of this happens before the client has
 * seen a byte, so a retry can never duplicate a partial answer.
 */
import type { Config } from "../config/schema";
import { GatewayError } from "../errors";
import { checkConnect } from "./connect";
import type { ModelRoute, Target } from "./registry";
import { orderTargets } from "./select";
import { abandonAttempt, beginAttempt, isAvailable, recordFailure, recordSuccess } from "./upstream-state";

export interface ForwardInput {
  route: ModelRoute;
  body: Record<string, unknown>;
  /** Aborted when the client goes away. */
  clientSignal: AbortSignal;
  routing: Config["routing"];
  now: () => number;
  random?: () => number;
}

export interface Forwarded {
  response: Response;
  target: Target;
  /** Aborts the chosen upstream request (idle timeout, client gone). */
  abort: (reason: string) => void;
  /** Time spent waiting on upstreams until response headers, failed attempts included, ms. */
  upstreamMs: number;
  attempts: number;
}

/** An upstream not heard from for this long may have lost its pooled connections: check connect. */
const COLD_AFTER_MS = 30_000;
const USES_PROXY = Boolean(process.env.HTTP_PROXY || process.env.HTTPS_PROXY || process.env.http_proxy || process.env.https_proxy);

export async function forwardChat(input: ForwardInput): Promise<Forwarded | GatewayError> {
  const { route, routing, now } = input;
  const order = orderTargets(route, now(), input.random);
  if (order.length === 0) return allCoolingDown(route, now());
  let lastFailure: AttemptFailure | null = null;
  let timedOut: Set<Target> | null = null;
  let upstreamMs = 0;
  for (let i = 0; i < routing.max_attempts; i++) {
    const round = Math.floor(i / order.length);
    const target = order[i % order.length];
    if (round > 0) {
      if (timedOut?.has(target) || !isAvailable(target.upstream, now())) continue;
      if (routing.retry_backoff_ms > 0) await Bun.sleep(routing.retry_backoff_ms * 2 ** (round - 1));
    }
    if (input.clientSignal.aborted) break;
    beginAttempt(target.upstream, now());
    const started = performance.now();
    const outcome = await attempt(target, input, now());
    const elapsed = performance.now() - started;
    upstreamMs += elapsed;
    if (!("failure" in outcome)) {
      recordSuccess(target.upstream, now(), elapsed);
      return { response: outcome.response, abort: outcome.abort, target, upstreamMs, attempts: i + 1 };
    }
    if (input.clientSignal.aborted) {
      abandonAttempt(target.upstream);
      break;
    }
    recordFailure(target.upstream, now(), outcome.message, routing);
    if (outcome.failure === "timeout") (timedOut ??= new Set()).add(target);
    lastFailure = outcome;
  }
  if (input.clientSignal.aborted) return new GatewayError("upstream_error", "the client went away before an upstream answered");
  return new GatewayError(lastFailure!.failure === "timeout" ? "upstream_timeout" : "upstream_error", lastFailure!.message);
}

/** A failed attempt, as a plain value: errors with stack traces are built once, for the client. */
interface AttemptFailure {
  failure: "timeout" | "error";
  message: string;
}

function allCoolingDown(route: ModelRoute, now: number): GatewayError {
  let until = Infinity;
  for (const t of route.targets) until = Math.min(until, t.upstream.cooldownUntil || now);
  const seconds = Math.max(1, Math.ceil((until - now) / 1000));
  return new GatewayError(
    "service_unavailable",
    `every upstream of model "${route.id}" is cooling down after repeated failures; try again in ${seconds} s`,
    { headers: { "retry-after": String(seconds) } },
  );
}

async function attempt(target: Target, input: ForwardInput, now: number): Promise<Pick<Forwarded, "response" | "abort"> | AttemptFailure> {
  const upstream = target.upstream;
  const cold = upstream.lastContactAt === null || now - upstream.lastContactAt > COLD_AFTER_MS;
  if (cold && !USES_PROXY) {
    const reach = await checkConnect(upstream.hostname, upstream.port, upstream.config.connect_timeout_ms);
    if (reach === "timeout") {
      return { failure: "timeout", message: `upstream "${upstream.name}" did not accept a connection within ${upstream.config.connect_timeout_ms} ms` };
    }
    if (reach === "refused") return { failure: "error", message: `upstream "${upstream.name}" is unreachable (connection refused)` };
  }
  const controller = new AbortController();
  const onClientAbort = (): void => controller.abort(new Error("client closed"));
  input.clientSignal.addEventListener("abort", onClientAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error("timeout"));
  }, upstream.config.first_byte_timeout_ms);
  // The body is the gateway's own parse of the request: set the target's model name in place.
  input.body.model = target.model;
  try {
    const response = await fetch(upstream.chatUrl, {
      method: "POST",
      headers: upstream.chatHeaders,
      body: JSON.stringify(input.body),
      signal: controller.signal,
    });
    clearTimeout(timer);
    upstream.lastContactAt = now;
    if (response.status === 429 || response.status >= 500) {
      input.clientSignal.removeEventListener("abort", onClientAbort);
      await discard(response);
      return { failure: "error", message: `upstream "${upstream.name}" answered ${response.status}` };
    }
    return { response, abort: (reason) => controller.abort(new Error(reason)) };
  } catch {
    clearTimeout(timer);
    input.clientSignal.removeEventListener("abort", onClientAbort);
    if (timedOut) {
      return { failure: "timeout", message: `upstream "${upstream.name}" did not answer within ${upstream.config.first_byte_timeout_ms} ms` };
    }
    return { failure: "error", message: `upstream "${upstream.name}" is unreachable` };
  }
}

/** Reads a small error body to its end so the keep-alive connection is reused; cancels a large one. */
async function discard(response: Response): Promise<void> {
  const length = Number(response.headers.get("content-length") ?? Infinity);
  if (length <= 65_536) await response.arrayBuffer().catch(() => {});
  else await response.body?.cancel().catch(() => {});
}
