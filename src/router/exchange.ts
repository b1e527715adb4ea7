/**
 * What forwarding and relaying see of one request to an upstream, whichever client carried it:
 * plain-http upstreams (the usual model server on the same machine or LAN) go through the
 * gateway's own keep-alive HTTP/1.1 client (./http1.ts), which runs on the server's event loop;
 * https upstreams, and every upstream when an HTTP proxy is set in the environment, go through
 * fetch (./fetch-exchange.ts), for its TLS and proxy support. Both give an UpstreamExchange, and
 * both fail with an UpstreamFailure.
 */
export interface UpstreamExchange {
  /** Settles once the status line and headers have arrived; rejects with an UpstreamFailure. */
  reply: Promise<UpstreamReply>;
  /** Gives up on the request (timeout, client gone): the reply or its body fails, the connection closes. */
  abort(reason: string): void;
}

export interface UpstreamReply {
  status: number;
  /** The whole body as text if it has already arrived (so text() would not wait), else null. */
  textNow(): string | null;
  /** A response header by lower-case name. */
  header(name: string): string | null;
  /** The whole body as text; rejects if the body breaks off or the exchange is aborted. */
  text(): Promise<string>;
  /** The body as it arrives; errors if it breaks off. Cancelling it aborts the exchange. */
  body(): ReadableStream<Uint8Array>;
  /** The body ends with the connection (no length, not chunked): its end cannot tell a whole answer from a cut one. */
  readonly closeDelimited: boolean;
}

export type FailureKind = "connect_timeout" | "refused" | "unresolved" | "broken" | "aborted" | "too_large";

/**
 * The most a non-streamed answer may hold. Chat answers are kilobytes; without a bound, an upstream
 * that never ends its body would grow the gateway's memory until the idle timeout (gigabytes).
 */
export const MAX_ANSWER_BYTES = 32 * 1024 * 1024;

export function answerTooLarge(upstream: string): UpstreamFailure {
  return new UpstreamFailure("too_large", `upstream "${upstream}" answered more than ${MAX_ANSWER_BYTES / 1024 / 1024} MiB`);
}

/** Why an exchange failed, as a plain value the forwarder maps to its error messages. */
export class UpstreamFailure extends Error {
  constructor(
    readonly kind: FailureKind,
    message: string,
  ) {
    super(message);
  }
}
