/**
 * A keep-alive HTTP/1.1 client for plain-http upstreams, on Bun's TCP sockets. It runs on the
 * server's own event loop, so a request costs no hand-over to a client thread: the request goes
 * out in one write, and an answer that arrives in one packet is parsed and complete in one
 * callback. This file is the exchange (one request and its answer); the connections, their idle
 * pool and the write coalescing are in ./http1-connection.ts.
 *
 * Invariants:
 * - an exchange settles exactly once: answered (status and headers arrived) or failed;
 * - a reused connection that closes before any byte of the answer arrived, or answers 408, was
 *   timed out by the upstream while idle, so the request is sent once more on a new connection
 *   (never after the upstream has begun any other answer).
 */
import { Connection, takeIdleConnection } from "./http1-connection";
import type { Http1Reply } from "./http1-reply";
import { UpstreamFailure, type UpstreamExchange } from "./upstream-client";

export { closeIdleConnections } from "./http1-connection";

export interface Http1Origin {
  hostname: string;
  port: number;
  /** "POST /path HTTP/1.1" and every header line but Content-Length, each ending in CRLF. */
  requestHead: string;
  connectTimeoutMs: number;
  /** For messages: the upstream's name. */
  name: string;
}

/** What a connection needs of the exchange it carries. */
export interface ConnectionExchange {
  readonly origin: Http1Origin;
  /** The whole request, head and body, and its size in bytes. */
  readonly payload: string;
  readonly payloadBytes: number;
  readonly settled: boolean;
  conn: Connection | null;
  answered(reply: Http1Reply): void;
  fail(failure: UpstreamFailure): void;
  /** Sends the request again (retry: on a new connection). */
  start(retry: boolean): void;
}

export function http1Post(origin: Http1Origin, body: string): UpstreamExchange {
  const bodyBytes = Buffer.byteLength(body);
  const head = `${origin.requestHead}content-length: ${bodyBytes}\r\n\r\n`;
  // The head is ASCII (built from a validated URL and config), so its length is its size in bytes.
  const exchange = new Exchange(origin, head + body, head.length + bodyBytes);
  exchange.start(false);
  return exchange;
}

class Exchange implements UpstreamExchange, ConnectionExchange {
  reply: Promise<Http1Reply>;
  conn: Connection | null = null;
  settled = false;
  private resolve!: (reply: Http1Reply) => void;
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

  start(retry: boolean): void {
    const idle = retry ? undefined : takeIdleConnection(this.origin);
    if (idle) idle.send(this, true);
    else Connection.open(this);
  }

  answered(reply: Http1Reply): void {
    this.settled = true;
    this.resolve(reply);
  }

  fail(failure: UpstreamFailure): void {
    if (this.settled) return;
    this.settled = true;
    this.reject(failure);
  }

  abort(reason: string): void {
    const failure = new UpstreamFailure("aborted", reason);
    this.fail(failure);
    this.conn?.breakOff(this, failure);
  }
}
