/**
 * Opening a connection of the HTTP/1.1 client (./http1.ts) for its first exchange: the connect,
 * bounded by the origin's connect timeout, the socket's events handed to the Connection, and a
 * connect that failed in the gateway's words.
 */
import { unresolved } from "./connect";
import { UpstreamFailure } from "./exchange";
import { Connection, type Http1Socket } from "./http1-connection";
import type { ConnectionExchange, ConnectionPool } from "./http1-types";

const HANDLERS = {
  data: (socket: Http1Socket, data: Buffer) => socket.data.onData(data),
  drain: (socket: Http1Socket) => socket.data.onDrain(),
  close: (socket: Http1Socket, error?: Error) => socket.data.onClose(error),
  timeout: (socket: Http1Socket) => socket.data.destroy(),
  error: (socket: Http1Socket) => socket.data.onError(),
  connectError: () => {},
};

/** Connects to `pool`'s origin (counted in the pool already) to carry `exchange`. */
export function openConnection(pool: ConnectionPool<Connection>, exchange: ConnectionExchange): void {
  const conn = new Connection(pool, exchange);
  const { hostname, port, connectTimeoutMs, name } = pool.origin;
  const timer = setTimeout(() => {
    conn.failConnect(new UpstreamFailure("connect_timeout", `upstream "${name}" did not accept a connection within ${connectTimeoutMs} ms`));
  }, connectTimeoutMs);
  Bun.connect<Connection>({ hostname, port, data: conn, socket: HANDLERS }).then(
    (socket) => {
      clearTimeout(timer);
      conn.connected(socket);
    },
    (err: unknown) => {
      clearTimeout(timer);
      conn.failConnect(unreachable(name, err));
    },
  );
}

/** A refused connect, a host name that does not resolve, or another error's code (never its message). */
function unreachable(name: string, err: unknown): UpstreamFailure {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === "ECONNREFUSED") return new UpstreamFailure("refused", `upstream "${name}" is unreachable (connection refused)`);
  if (unresolved(err)) return new UpstreamFailure("unresolved", `upstream "${name}" is unreachable (its host name did not resolve)`);
  const shown = typeof code === "string" && /^[A-Z0-9_]{1,32}$/.test(code) ? ` (${code})` : "";
  return new UpstreamFailure("refused", `upstream "${name}" is unreachable${shown}`);
}
