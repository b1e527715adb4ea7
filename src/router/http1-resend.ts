/**
 * When the HTTP/1.1 client (./http1.ts) sends a request again. A POST is not idempotent (RFC 9110
 * §9.2.2): it is repeated only when the upstream cannot have acted on it, at most once after it
 * was written, and always on a new connection (./http1-connection.ts does the sending).
 */
import type { ConnectionExchange } from "./http1-types";

/**
 * How soon after its request a pooled connection's close, with no byte of the answer, may be taken
 * for the upstream's idle close crossing the request on the wire (a round trip and a busy event
 * loop's turn; a model server takes longer to do anything with a request). See mayResendAfterClose.
 */
export const RESEND_WINDOW_MS = 200;

/** Where a connection's current request stands, as its close or its answer finds it. */
export interface SendProgress {
  /** The connection came from the pool (it carried an earlier exchange). */
  reused: boolean;
  written: boolean;
  /** performance.now() when the request was written. */
  writtenAt: number;
  /** A byte of the answer arrived. */
  received: boolean;
}

/**
 * May `exchange`, whose pooled connection ended before any byte of its answer, be sent again?
 * That holds when the request never went out (the close was read first), and is taken to hold
 * when the close came within RESEND_WINDOW_MS of the request: the upstream closed the connection
 * as idle while the request was on its way. A close later than that (a crash 60 s into a long
 * generation) may follow work done, and paid for by nobody: it is the upstream's failure, never a
 * second generation.
 */
export function mayResendAfterClose(progress: SendProgress, exchange: ConnectionExchange, now: number): boolean {
  if (!progress.reused || progress.received || exchange.settled) return false;
  return !progress.written || (!exchange.resent && now - progress.writtenAt <= RESEND_WINDOW_MS);
}

/**
 * A 408 on a reused connection: the upstream timed it out unused (RFC 9110 §15.5.9: the request
 * was not acted on, and may be repeated). Once more, on a new connection.
 */
export function mayResendAfter408(status: number, progress: Pick<SendProgress, "reused">, exchange: ConnectionExchange): boolean {
  return status === 408 && progress.reused && !exchange.resent;
}
