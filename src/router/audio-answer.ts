/**
 * An audio answer (speech) relayed to the client as the upstream sends it, under the upstream's
 * audio type (./answer-type.ts), by ./bytes.ts; when it ends, the target's health is told how, and
 * the call is settled and recorded once (./served.ts), estimated by its adapter when complete.
 */
import type { AppDeps } from "../deps";
import type { Forwarded } from "./forward";
import { recordTargetComplete, recordTargetFailure } from "./target-state";
import { audioType } from "./answer-type";
import { relayBytes } from "./bytes";
import { outcome, STREAM_END_STATUS, type Outcome, type Served } from "./served";

/** Audio relayed as it arrives, with the upstream's type; settled when it ends. */
export function relayedBytes(
  deps: AppDeps,
  served: Served,
  forwarded: Forwarded,
  headers: Record<string, string>,
  done: Pick<Outcome, "upstream" | "price" | "model" | "endpoint">,
): Response {
  const { reply, target } = forwarded;
  const { ctx } = served;
  headers["content-type"] = audioType(reply.header("content-type"));
  headers["x-content-type-options"] = "nosniff";
  const bodyStartedAt = performance.now();
  const stream = relayBytes(reply.body(), {
    idleTimeoutMs: target.upstream.config.idle_timeout_ms,
    abortUpstream: forwarded.abort,
    onEnd: (ended) => {
      if (ended === "upstream_error") recordTargetFailure(target, deps.now(), `upstream "${target.upstream.name}" broke off its answer`, deps.config.routing);
      else if (ended === "complete") recordTargetComplete(target, deps.now());
      const usage =
        ended === "complete"
          ? ctx.adapter.estimate({ body: ctx.body, bodyBytes: ctx.bodyBytes, defaultMaxTokens: deps.config.routing.default_max_tokens, completionTokens: 0 })
          : null;
      served.finish(outcome(done, STREAM_END_STATUS[ended], usage, forwarded.upstreamMs + performance.now() - bodyStartedAt));
      return served.committed;
    },
  });
  return new Response(stream, { status: reply.status, headers });
}
