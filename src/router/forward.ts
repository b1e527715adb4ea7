/**
 * Sends one chat request to a route's targets in order until one answers. Connection errors,
 * timeouts, 429 and 5xx move on to the next target (with backoff, at most `max_attempts`); this
 * all happens before the client has seen a byte, so a retry can never duplicate a partial answer.
 */
import type { Config } from "../config/schema";
import { GatewayError } from "../errors";
import type { ModelRoute, Target } from "./registry";
import { orderTargets } from "./select";
import { recordFailure, recordSuccess } from "./upstream-state";

export interface ForwardInput {
  route: ModelRoute;
  body: Record<string, unknown>;
  /** Aborted when the client goes away. */
  clientSignal: AbortSignal;
  routing: Config["routing"];
  now: () => number;
}

export interface Forwarded {
  response: Response;
  target: Target;
  /** Aborts the chosen upstream request (idle timeout, client gone). */
  abort: (reason: string) => void;
  /** Time spent waiting on upstreams, including failed attempts, ms. */
  upstreamMs: number;
  attempts: number;
}

export async function forwardChat(input: ForwardInput): Promise<Forwarded | GatewayError> {
  const { route, routing, now } = input;
  const order = orderTargets(route, now());
  if (order.length === 0) {
    return new GatewayError("upstream_error", `every upstream of model "${route.id}" is cooling down after repeated failures; try again shortly`);
  }
  let lastError: GatewayError | null = null;
  let upstreamMs = 0;
  const attempts = Math.min(order.length, routing.max_attempts);
  for (let i = 0; i < attempts; i++) {
    if (i > 0 && routing.retry_backoff_ms > 0) await Bun.sleep(routing.retry_backoff_ms * 2 ** (i - 1));
    if (input.clientSignal.aborted) break;
    const target = order[i];
    const started = performance.now();
    const outcome = await attempt(target, input);
    const elapsed = performance.now() - started;
    upstreamMs += elapsed;
    if (!(outcome instanceof GatewayError)) {
      recordSuccess(target.upstream, now(), elapsed);
      return { ...outcome, target, upstreamMs, attempts: i + 1 };
    }
    if (input.clientSignal.aborted) return outcome;
    recordFailure(target.upstream, now(), outcome.message, routing);
    lastError = outcome;
  }
  return lastError ?? new GatewayError("upstream_error", "the client went away before an upstream answered");
}

async function attempt(
  target: Target,
  input: ForwardInput,
): Promise<Pick<Forwarded, "response" | "abort"> | GatewayError> {
  const upstream = target.upstream;
  const controller = new AbortController();
  const onClientAbort = () => controller.abort(new Error("client closed"));
  input.clientSignal.addEventListener("abort", onClientAbort, { once: true });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new Error("timeout"));
  }, upstream.config.first_byte_timeout_ms);
  const headers: Record<string, string> = { "content-type": "application/json", accept: "application/json, text/event-stream" };
  if (upstream.authorization) headers.authorization = upstream.authorization;
  try {
    const response = await fetch(upstream.chatUrl, {
      method: "POST",
      headers,
      body: JSON.stringify({ ...input.body, model: target.model }),
      signal: controller.signal,
    });
    clearTimeout(timer);
    if (response.status === 429 || response.status >= 500) {
      await response.body?.cancel().catch(() => {});
      return new GatewayError("upstream_error", `upstream "${upstream.name}" answered ${response.status}`);
    }
    return { response, abort: (reason) => controller.abort(new Error(reason)) };
  } catch {
    clearTimeout(timer);
    input.clientSignal.removeEventListener("abort", onClientAbort);
    if (timedOut) {
      return new GatewayError("upstream_timeout", `upstream "${upstream.name}" did not answer within ${upstream.config.first_byte_timeout_ms} ms`);
    }
    return new GatewayError("upstream_error", `upstream "${upstream.name}" is unreachable`);
  }
}
