/**
 * A keep-alive HTTP/1.1 client for plain-http upstreams, on Bun's TCP sockets. It runs on the
 * server's own event loop, so a request costs no hand-over to a client thread: the request goes
 * out in one write, and an answer that arrives in one packet is parsed and complete in one
 * callback. This file is the exchange (one request and its answer); the connections to an origin
 * and how many may be open are in ./http1-pool.ts, one connection's reading and writing in
 * ./http1-connection.ts.
 *
 * Invariants:
 * - an exchange settles exactly once: answered (status and headers arrived) or failed;
 * - a request is sent again only when the upstream cannot have acted on it (a pooled connection
 *   that closed before the request went out or as it arrived, or answered 408: see
 *   ./http1-resend.ts), and after a write at most once, always on a new connection.
 */
import { UpstreamFailure, type UpstreamExchange, type UpstreamReply } from "./exchange";
import { poolOf } from "./http1-pool";
import type { ConnectionExchange, ExchangeConnection, Http1Origin } from "./http1-types";

export { closeIdleConnections } from "./http1-pool";
export type { Http1Origin } from "./http1-types";

/** Sends `body` with `requestHead` (the origin's own unless given: another path on the same connections). */
export function http1Post(origin: Http1Origin, body: string, requestHead = origin.requestHead): UpstreamExchange {
  const bodyBytes = Buffer.byteLength(body);
  const head = `${requestHead}content-length: ${bodyBytes}\r\n\r\n`;
  // In bytes, head too: it may carry a non-ASCII api_key, and an unsent rest is cut at a byte offset.
  const exchange = new Exchange(origin, head + body, Buffer.byteLength(head) + bodyBytes);
  poolOf(origin).send(exchange);
  return exchange;
}

class Exchange implements UpstreamExchange, ConnectionExchange {
  reply: Promise<UpstreamReply>;
  conn: ExchangeConnection | null = null;
  settled = false;
  resent = false;
  private resolve!: (reply: UpstreamReply) => void;
  private reject!: (failure: UpstreamFailure) => void;

  constructor(
    readonly origin: Http1Origin,
    readonly payload: string,
    readonly payloadBytes: number,
  ) {
    this.reply = new Promise((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  answered(reply: UpstreamReply): void {
    this.settled = true;
    this.resolve(reply);
  }

  fail(failure: UpstreamFailure): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(failure);
  }

  /** A waiting exchange is only marked settled: its pool skips it. */
  abort(reason: string): void {
    const failure = new UpstreamFailure("aborted", reason);
    this.fail(failure);
    this.conn?.breakOff(this, failure);
  }
}
