/**
 * The connections of the HTTP/1.1 client (./http1.ts) to each origin: how many may be open, the
 * idle ones, and the exchanges waiting for one.
 *
 * Invariants:
 * - at most `maxConnections` connections to an origin are open at once, counting each from the
 *   start of its connect to its close (connecting, carrying an exchange, or idle; a connect given
 *   up, to its timeout or its exchange's abort, counts until then); an exchange past that waits,
 *   first come first served, and its wait counts against its first-byte deadline like any other
 *   wait for the answer;
 * - an exchange waits only while no connection is idle: a connection whose answer ended goes to
 *   the first waiting exchange before the idle list, and a closed one's place opens a new
 *   connection for it;
 * - idle connections close after IDLE_SECONDS, below the 5 s keep-alive of common model servers
 *   (uvicorn, Node), and do not keep the process alive;
 * - for REUSE_PAUSE_MS after an upstream sent bytes nobody asked for, no connection to it is
 *   reused: HTTP/1.1 numbers no answers, so an extra answer that reaches a connection after its
 *   next request went out reads as that request's answer, and nothing can tell. The connection
 *   ./http1-connection.ts caught it on is dropped; each request then has a connection of its own,
 *   whose first answer can only be its own.
 */
import { openConnection } from "./http1-connect";
import type { Connection } from "./http1-connection";
import type { ConnectionExchange, ConnectionPool, Http1Origin } from "./http1-types";

const IDLE_SECONDS = 4;
const REUSE_PAUSE_MS = 60_000;

/** The connections to one origin. */
export class Pool implements ConnectionPool<Connection> {
  /** Connections counted against maxConnections. */
  open = 0;
  /** Idle connections, the most recently used last. */
  readonly idle: Connection[] = [];
  private waiting: ConnectionExchange[] = [];
  /** performance.now() until which no connection is reused. */
  private reuseAfter = 0;

  constructor(readonly origin: Http1Origin) {}

  /** Sends `exchange` on an idle connection, a new one, or the first to free up. */
  send(exchange: ConnectionExchange): void {
    const idle = this.idle.pop();
    if (idle !== undefined) return idle.send(exchange, "pool");
    if (this.open < this.origin.maxConnections) return this.connect(exchange);
    this.waiting.push(exchange);
  }

  /**
   * Sends `exchange` again, ahead of the waiting ones, on the new connection that the place of the
   * one it leaves opens (the caller closes that one next).
   */
  sendFirst(exchange: ConnectionExchange): void {
    this.waiting.unshift(exchange);
  }

  /** One of the origin's connections received bytes nobody asked for. */
  unsolicited(): void {
    this.reuseAfter = performance.now() + REUSE_PAUSE_MS;
  }

  /** `conn` ended its answer and may carry another request. */
  released(conn: Connection): void {
    if (this.reuseAfter !== 0 && performance.now() < this.reuseAfter) return conn.destroy();
    const next = this.nextWaiting();
    if (next !== null) return conn.send(next, "pool");
    conn.socket!.timeout(IDLE_SECONDS);
    conn.socket!.unref();
    this.idle.push(conn);
  }

  /** A counted connection closed (or never connected): its place goes to the first waiting exchange. */
  closed(conn: Connection): void {
    this.open -= 1;
    const at = this.idle.indexOf(conn);
    if (at !== -1) this.idle.splice(at, 1);
    const next = this.nextWaiting();
    if (next !== null) this.connect(next);
  }

  private connect(exchange: ConnectionExchange): void {
    this.open += 1;
    openConnection(this, exchange);
  }

  /** The first waiting exchange still wanted (one given up while waiting is skipped). */
  private nextWaiting(): ConnectionExchange | null {
    while (this.waiting.length > 0) {
      const next = this.waiting.shift()!;
      if (!next.settled) return next;
    }
    return null;
  }
}

const pools = new Map<Http1Origin, Pool>();

export function poolOf(origin: Http1Origin): Pool {
  let pool = pools.get(origin);
  if (pool === undefined) pools.set(origin, (pool = new Pool(origin)));
  return pool;
}

/** Closes every idle connection (shutdown, tests). */
export function closeIdleConnections(): void {
  for (const pool of pools.values()) for (const conn of pool.idle.splice(0)) conn.destroy();
}
