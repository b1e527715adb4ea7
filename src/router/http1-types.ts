/**
 * What the parts of the HTTP/1.1 client (./http1.ts) know of one another: an origin, the exchange
 * a connection carries, what an exchange and its reply need of that connection, and what a
 * connection needs of its pool. Each part imports these, never another part's class, so the
 * client's files form no cycle, not even of types.
 */
import type { UpstreamFailure, UpstreamReply } from "./exchange";

export interface Http1Origin {
  hostname: string;
  port: number;
  /** "POST /path HTTP/1.1" and every header line but Content-Length, each ending in CRLF: chat's (another path's is given to http1Post). */
  requestHead: string;
  connectTimeoutMs: number;
  /** Most connections open to the origin at once; requests past it wait for one (./http1-pool.ts). */
  maxConnections: number;
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
  conn: ExchangeConnection | null;
  /** Written once and sent again already: never again. */
  resent: boolean;
  answered(reply: UpstreamReply): void;
  fail(failure: UpstreamFailure): void;
}

/** What an exchange, and the reply it reads, need of the connection carrying it. */
export interface ExchangeConnection {
  readonly origin: Http1Origin;
  /** The exchange it carries now; null once its answer ended. */
  readonly exchange: ConnectionExchange | null;
  /** Ends `exchange` with `failure` if it is still this connection's, and closes the connection. */
  breakOff(exchange: ConnectionExchange, failure: UpstreamFailure): void;
  /** A streamed body's reader lags: stop reading the socket. */
  pause(): void;
  resume(): void;
}

/** What a connection needs of its origin's pool; `C` is the connection. */
export interface ConnectionPool<C> {
  readonly origin: Http1Origin;
  /** The connection received bytes nobody asked for. */
  unsolicited(): void;
  /** `conn` ended its answer and may carry another request. */
  released(conn: C): void;
  /** Sends `exchange` again, ahead of the waiting ones. */
  sendFirst(exchange: ConnectionExchange): void;
  /** A counted connection closed (or never connected). */
  closed(conn: C): void;
}

/** What the turn's batch of writes (./http1-writes.ts) needs of a connection. */
export interface RequestWriter {
  /** Writes the request of the exchange it carries, unless that ended meanwhile. */
  writeRequest(): void;
}
