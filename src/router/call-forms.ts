/**
 * What each target of a call is sent, and where (the request half of ./pipeline.ts's call): an
 * upload's bytes; the adapter's native form to a target whose upstream serves the endpoint's API
 * itself (its own path, the client's API headers passed on); else the endpoint's own form under
 * its upstreamPath: a translation built per target, or the client's body naming the target's model.
 * Which form a target got is servesNatively(adapter, target) (./adapters/types.ts), so the answer
 * is read the same way.
 */
import type { ForwardInput } from "./forward";
import { serialize } from "./attempt-body";
import { servesNatively } from "./adapters/types";
import type { CallContext } from "./served";

export interface FormOptions {
  /** The client asked for an event stream of a completion. */
  streamed: boolean;
  /** A priced completion's limit, for the body the target is sent. */
  tokenLimit: number | null;
}

export function callForms(
  ctx: CallContext,
  options: FormOptions,
): Pick<ForwardInput, "upstreamPath" | "payload" | "contentType" | "headersFor" | "bodyFailure"> {
  const { adapter, body, upload } = ctx;
  const { streamed, tokenLimit } = options;
  if (upload)
    return { upstreamPath: adapter.upstreamPath, payload: (target) => upload.take(target.model), contentType: upload.contentType, bodyFailure: upload.failure };
  const native = adapter.native;
  // The parsed body is ours: amend it in place rather than copying it per request. An adapter
  // with a native form sends the client's body only in that form, where chat's option has no place.
  if (streamed && native === undefined) body.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
  return {
    upstreamPath: native === undefined ? adapter.upstreamPath : (target) => (servesNatively(adapter, target) ? native.upstreamPath : adapter.upstreamPath),
    payload: (target) => {
      if (native !== undefined && servesNatively(adapter, target)) return serialize(native.payload(body, target, tokenLimit));
      if (!adapter.payload) {
        // The body is the gateway's own parse of the request: set the target's model name in place.
        body.model = target.model;
        return serialize(body);
      }
      const sent = adapter.payload(body, target, tokenLimit);
      // A translation is a body of its own: it asks for the stream's usage as the client's body does.
      if (streamed && sent !== body) sent.stream_options = { ...(sent.stream_options as object | undefined), include_usage: true };
      return serialize(sent);
    },
    headersFor:
      native?.passHeaders === undefined
        ? undefined
        : (target) => (servesNatively(adapter, target) ? passedHeaders(ctx.request, native.passHeaders!) : undefined),
  };
}

/** The client's headers named, those present; undefined when none is. */
function passedHeaders(request: Request, names: readonly string[]): Record<string, string> | undefined {
  let passed: Record<string, string> | undefined;
  for (const name of names) {
    const value = request.headers.get(name);
    if (value !== null) (passed ??= {})[name] = value;
  }
  return passed;
}
