/**
 * A keep-alive HTTP/1.1 client for plain-http upstreams, on Bun's TCP sockets. It runs on the
 * server's own event loop, so a request costs no hand-over to a client thread: the request goes
 * out in one write, and an answer that arrives in one packet is parsed and complete in one
 * callback.
 *
 * Invariants:
 * - one exchange per connection at a time (no pipelining); a connection returns to its origin's
 *   idle list only after a complete, keep-alive answer with no stray bytes after it;
 * - idle connections close after IDLE_SECONDS, below the 5 s keep-alive of common model servers
 *   (uvicorn, Node), and do not keep the process alive;
 * - a reused connection that closes before any byte of the answer arrived was closed by the
 *   upstream while idle, so the request is sent once more on a new connection (never twice after
 *   the upstream has begun to answer);
 * - bodies are delivered as they arrive; a streamed body pauses the socket while its reader lags.
 */
import type { Socket } from "bun";
import { ChunkedDecoder, parseHead, ProtocolError, type ResponseHead } from "./http1-parse";
import { Http1Reply } from "./http1-reply";
import { UpstreamFailure, type UpstreamExchange } from "./upstream-client";

const IDLE_SECONDS = 4;
const MAX_IDLE_PER_ORIGIN = 256;

export interface Http1Origin {
  hostname: string;
  port: number;
  /** "POST /path HTTP/1.1" and every header line but Content-Length, each ending in CRLF. */
  requestHead: string;
  connectTimeoutMs: number;
  /** For messages: the upstream's name. */
  name: string;
}

const idleByOrigin = new Map<Http1Origin, Connection[]>();

export function http1Post(origin: Http1Origin, body: string): UpstreamExchange {
  const bodyBytes = Buffer.byteLength(body);
  const head = `${origin.requestHead}content-length: ${bodyBytes}\r\n\r\n`;
  // The head is ASCII (built from a validated URL and config), so its length is its size in bytes.
  const exchange = new Exchange(origin, head + body, head.length + bodyBytes);
  exchange.start(false);
  return exchange;
}

/** Closes every idle connection (shutdown, tests). */
export function closeIdleConnections(): void {
  for (const idle of idleByOrigin.values()) for (const conn of idle.splice(0)) conn.destroy();
}

class Exchange implements UpstreamExchange {
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
    const idle = retry ? undefined : idleByOrigin.get(this.origin)?.pop();
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

type Http1Socket = Socket<Connection>;

class Connection {
  socket: Http1Socket | null = null;
  exchange: Exchange | null = null;
  private reused = false;
  private received = false;
  private headBytes: Buffer | null = null;
  private head: ResponseHead | null = null;
  private reply: Http1Reply | null = null;
  private remaining = 0;
  private chunked: ChunkedDecoder | null = null;
  private unsent: Buffer | null = null;
  private paused = false;
  private closed = false;

  constructor(readonly origin: Http1Origin) {}

  static open(exchange: Exchange): void {
    const conn = new Connection(exchange.origin);
    conn.exchange = exchange;
    exchange.conn = conn;
    const { hostname, port, connectTimeoutMs, name } = exchange.origin;
    const timer = setTimeout(() => {
      conn.closed = true;
      exchange.fail(new UpstreamFailure("connect_timeout", `upstream "${name}" did not accept a connection within ${connectTimeoutMs} ms`));
    }, connectTimeoutMs);
    const refused = (): void => {
      clearTimeout(timer);
      conn.closed = true;
      exchange.fail(new UpstreamFailure("refused", `upstream "${name}" is unreachable (connection refused)`));
    };
    Bun.connect<Connection>({ hostname, port, data: conn, socket: HANDLERS }).then((socket) => {
      clearTimeout(timer);
      if (conn.closed) return socket.terminate();
      conn.socket = socket;
      // Still open means still wanted: every way the exchange can end before this closes `conn`.
      conn.send(exchange, false);
    }, refused);
  }

  send(exchange: Exchange, reused: boolean): void {
    this.exchange = exchange;
    exchange.conn = this;
    this.reused = reused;
    this.received = false;
    const socket = this.socket!;
    socket.timeout(0);
    socket.ref();
    const written = socket.write(exchange.payload);
    if (written < exchange.payloadBytes) this.unsent = Buffer.from(exchange.payload).subarray(Math.max(0, written));
  }

  onDrain(): void {
    if (!this.unsent || !this.socket) return;
    const written = this.socket.write(this.unsent);
    this.unsent = written < this.unsent.length ? this.unsent.subarray(Math.max(0, written)) : null;
  }

  onData(data: Buffer): void {
    if (!this.exchange) return this.destroy(); // bytes on an idle connection: not ours to read
    this.received = true;
    try {
      if (this.head) return this.onBody(data, 0);
      let bytes = this.headBytes ? Buffer.concat([this.headBytes, data]) : data;
      let head = parseHead(bytes);
      while (head !== null && head.status < 200) {
        // An interim answer (100 Continue, 103 Early Hints): skip it.
        bytes = bytes.subarray(head.size);
        head = parseHead(bytes);
      }
      if (head === null) {
        this.headBytes = bytes;
        return;
      }
      this.headBytes = null;
      this.head = head;
      this.remaining = head.length;
      this.chunked = head.framing === "chunked" ? new ChunkedDecoder() : null;
      this.reply = new Http1Reply(head.status, head.headers, this);
      this.exchange.answered(this.reply);
      if (head.framing === "empty" || (head.framing === "length" && head.length === 0)) this.complete(bytes.length > head.size);
      else if (bytes.length > head.size) this.onBody(bytes, head.size);
    } catch (err) {
      const message = err instanceof ProtocolError ? err.message : String(err);
      this.breakOff(this.exchange!, new UpstreamFailure("broken", `upstream "${this.origin.name}" sent an invalid answer: ${message}`));
    }
  }

  /** Bytes from `offset` on of `data` follow the head. */
  private onBody(data: Buffer, offset: number): void {
    const reply = this.reply!;
    if (this.chunked) {
      const input = offset === 0 ? data : data.subarray(offset);
      const used = this.chunked.feed(input, (piece) => reply.push(piece, 0, piece.length));
      if (this.chunked.done) this.complete(used < input.length);
    } else if (this.head!.framing === "length") {
      const take = Math.min(this.remaining, data.length - offset);
      reply.push(data, offset, offset + take);
      this.remaining -= take;
      if (this.remaining === 0) this.complete(offset + take < data.length);
    } else {
      reply.push(data, offset, data.length);
    }
  }

  private complete(strayBytes: boolean): void {
    const reply = this.reply!;
    // An upstream may answer before it has read the whole request (a 413, say): with request bytes
    // still unsent, the connection cannot carry another request.
    const keepAlive = this.head!.keepAlive && !strayBytes && this.unsent === null;
    this.exchange = null;
    this.head = null;
    this.reply = null;
    this.chunked = null;
    reply.end();
    this.resume();
    if (keepAlive) this.release();
    else this.destroy();
  }

  /** Back to the idle list, or closed when the list is full. */
  release(): void {
    if (this.closed || !this.socket) return;
    this.exchange = null;
    let idle = idleByOrigin.get(this.origin);
    if (!idle) idleByOrigin.set(this.origin, (idle = []));
    if (idle.length >= MAX_IDLE_PER_ORIGIN) return this.destroy();
    this.socket.timeout(IDLE_SECONDS);
    this.socket.unref();
    idle.push(this);
  }

  /** Ends `exchange` with `failure` if it is still this connection's, and closes the connection. */
  breakOff(exchange: Exchange, failure: UpstreamFailure): void {
    if (this.exchange !== exchange) return;
    exchange.fail(failure);
    this.reply?.fail(failure);
    this.destroy();
  }

  onClose(): void {
    const wasClosed = this.closed;
    this.closed = true;
    this.dropFromIdle();
    const exchange = this.exchange;
    if (!exchange || wasClosed) return;
    this.exchange = null;
    if (this.head?.framing === "until-close") return this.reply!.end();
    if (!this.received && this.reused && !exchange.settled) return exchange.start(true);
    const failure = new UpstreamFailure("broken", `upstream "${this.origin.name}" closed the connection ${this.head ? "in the middle of its answer" : "without answering"}`);
    exchange.fail(failure);
    this.reply?.fail(failure);
  }

  pause(): void {
    this.paused = true;
    this.socket?.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket?.resume();
  }

  onError(): void {
    if (this.exchange) this.breakOff(this.exchange, new UpstreamFailure("broken", `upstream "${this.origin.name}" connection failed`));
    else this.destroy();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.exchange = null;
    this.unsent = null;
    this.dropFromIdle();
    this.socket?.terminate();
  }

  private dropFromIdle(): void {
    const idle = idleByOrigin.get(this.origin);
    const at = idle ? idle.indexOf(this) : -1;
    if (at !== -1) idle!.splice(at, 1);
  }
}

export type { Connection };

const HANDLERS = {
  data: (socket: Http1Socket, data: Buffer) => socket.data.onData(data),
  drain: (socket: Http1Socket) => socket.data.onDrain(),
  close: (socket: Http1Socket) => socket.data.onClose(),
  timeout: (socket: Http1Socket) => socket.data.destroy(),
  error: (socket: Http1Socket) => socket.data.onError(),
  connectError: () => {},
};
