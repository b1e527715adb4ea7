/**
 * The connections of the HTTP/1.1 client (./http1.ts): one exchange at a time each, an idle pool
 * per origin, and requests written together at the end of the event loop's turn.
 *
 * Invariants:
 * - no pipelining; a connection returns to its origin's idle list only after a complete,
 *   keep-alive answer with no stray bytes after it and no request bytes left unsent;
 * - idle connections close after IDLE_SECONDS, below the 5 s keep-alive of common model servers
 *   (uvicorn, Node), and do not keep the process alive;
 * - a turn's requests are queued and written together after its other events (setImmediate):
 *   waking an upstream on the same core hands it the core, better after the turn than mid-turn;
 * - bodies are delivered as they arrive; a streamed body pauses the socket while its reader lags.
 */
import type { Socket } from "bun";
import { ChunkedDecoder, parseHead, ProtocolError, type ResponseHead } from "./http1-parse";
import { Http1Reply } from "./http1-reply";
import { UpstreamFailure } from "./upstream-client";
import type { ConnectionExchange, Http1Origin } from "./http1";

const IDLE_SECONDS = 4;
const MAX_IDLE_PER_ORIGIN = 256;

const idleByOrigin = new Map<Http1Origin, Connection[]>();

/** The most recently used idle connection to `origin`, taken off the idle list. */
export function takeIdleConnection(origin: Http1Origin): Connection | undefined {
  return idleByOrigin.get(origin)?.pop();
}

/** Closes every idle connection (shutdown, tests). */
export function closeIdleConnections(): void {
  for (const idle of idleByOrigin.values()) for (const conn of idle.splice(0)) conn.destroy();
}

let queuedWrites: Connection[] = [];

function writeQueued(): void {
  const batch = queuedWrites;
  queuedWrites = [];
  for (const conn of batch) conn.writeRequest();
}

type Http1Socket = Socket<Connection>;

export class Connection {
  socket: Http1Socket | null = null;
  exchange: ConnectionExchange | null = null;
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

  static open(exchange: ConnectionExchange): void {
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

  /** Takes `exchange`; its request goes out with the other requests of this turn (writeQueued). */
  send(exchange: ConnectionExchange, reused: boolean): void {
    this.exchange = exchange;
    exchange.conn = this;
    this.reused = reused;
    this.received = false;
    const socket = this.socket!;
    socket.timeout(0);
    socket.ref();
    if (queuedWrites.push(this) === 1) setImmediate(writeQueued);
  }

  writeRequest(): void {
    const exchange = this.exchange;
    // Ended before its turn came (aborted, or the connection closed and the request went elsewhere).
    if (exchange === null || this.closed || this.socket === null) return;
    const written = this.socket.write(exchange.payload);
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
      // A 408 on a reused connection: the upstream timed it out as the request arrived, and RFC 9110
      // lets the request be repeated. Like a close before any answer: once more, on a new connection.
      if (head.status === 408 && this.reused) return this.resendElsewhere(this.exchange);
      this.headBytes = null;
      this.head = head;
      this.remaining = head.length;
      this.chunked = head.framing === "chunked" ? new ChunkedDecoder() : null;
      this.reply = new Http1Reply(head.status, head.headers, this, head.framing === "until-close");
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

  /** The upstream timed this reused connection out while idle: close it, send `exchange` on a new one. */
  private resendElsewhere(exchange: ConnectionExchange): void {
    this.destroy();
    exchange.start(true);
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
  breakOff(exchange: ConnectionExchange, failure: UpstreamFailure): void {
    if (this.exchange !== exchange) return;
    exchange.fail(failure);
    this.reply?.fail(failure);
    this.destroy();
  }

  /** `error`: the connection was reset (ECONNRESET), not closed in order. */
  onClose(error?: Error): void {
    const wasClosed = this.closed;
    this.closed = true;
    this.dropFromIdle();
    const exchange = this.exchange;
    if (!exchange || wasClosed) return;
    this.exchange = null;
    // A body framed by the close ends with an orderly close; a reset cut it short.
    if (this.head?.framing === "until-close" && !error) return this.reply!.end();
    if (!this.received && this.reused && !exchange.settled) return this.resendElsewhere(exchange);
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

const HANDLERS = {
  data: (socket: Http1Socket, data: Buffer) => socket.data.onData(data),
  drain: (socket: Http1Socket) => socket.data.onDrain(),
  close: (socket: Http1Socket, error?: Error) => socket.data.onClose(error),
  timeout: (socket: Http1Socket) => socket.data.destroy(),
  error: (socket: Http1Socket) => socket.data.onError(),
  connectError: () => {},
};
