/**
 * One connection of the HTTP/1.1 client (./http1.ts): one exchange at a time, its request written
 * with the other requests of the turn, its answer read as it arrives. Its origin's pool
 * (./http1-pool.ts) hands it exchanges and takes it back.
 *
 * Invariants:
 * - no pipelining; a connection goes back to its pool only after a complete, keep-alive answer
 *   with no stray bytes after it and no request bytes left unsent;
 * - its request goes out with the turn's others (./http1-writes.ts), on a pooled connection only
 *   after the event loop has polled the socket once more: bytes that arrive before the request
 *   went out (an answer nobody asked for, the upstream's close) answer nothing of ours, and
 *   discard the connection;
 * - bodies are delivered as they arrive; a streamed body pauses the socket while its reader lags.
 */
import type { Socket } from "bun";
import { UpstreamFailure } from "./exchange";
import { ChunkedDecoder, parseHead, ProtocolError, type ResponseHead } from "./http1-parse";
import { Http1Reply } from "./http1-reply";
import type { ConnectionExchange, ConnectionPool, ExchangeConnection, Http1Origin, RequestWriter } from "./http1-types";
import { mayResendAfter408, mayResendAfterClose, type SendProgress } from "./http1-resend";
import { queueWrite } from "./http1-writes";

export type Http1Socket = Socket<Connection>;

export class Connection implements ExchangeConnection, RequestWriter, SendProgress {
  socket: Http1Socket | null = null;
  exchange: ConnectionExchange | null = null;
  /** Where its request stands (./http1-resend.ts reads it when the connection closes or answers 408). */
  reused = false;
  written = false;
  writtenAt = 0;
  received = false;
  private headBytes: Buffer | null = null;
  private head: ResponseHead | null = null;
  private reply: Http1Reply | null = null;
  private remaining = 0;
  private chunked: ChunkedDecoder | null = null;
  private unsent: Buffer | null = null;
  private paused = false;
  private closed = false;
  /** Still counted in its pool's open connections. */
  private counted = true;

  /** Counted in `pool` already, connecting to carry `exchange`. */
  constructor(
    readonly pool: ConnectionPool<Connection>,
    exchange: ConnectionExchange,
  ) {
    this.exchange = exchange;
    exchange.conn = this;
  }

  get origin(): Http1Origin {
    return this.pool.origin;
  }

  /** The connect's outcome (./http1-connect.ts): `exchange` goes out on it, unless given up meanwhile. */
  connected(socket: Http1Socket): void {
    if (this.closed) return socket.terminate();
    this.socket = socket;
    // Still open means still wanted: every way the exchange can end before this closes the connection.
    this.send(this.exchange!, "new");
  }

  failConnect(failure: UpstreamFailure): void {
    const exchange = this.exchange;
    if (this.closed || exchange === null) return;
    this.destroy();
    exchange.fail(failure);
  }

  /** Takes `exchange`; its request goes out with the other requests of this turn (or the next: queueWrite). */
  send(exchange: ConnectionExchange, from: "new" | "pool"): void {
    this.exchange = exchange;
    exchange.conn = this;
    this.reused = from === "pool";
    this.written = false;
    this.received = false;
    const socket = this.socket!;
    socket.timeout(0);
    socket.ref();
    queueWrite(this, from);
  }

  writeRequest(): void {
    const exchange = this.exchange;
    // Ended before its turn came (aborted, or the connection closed and the request went elsewhere).
    if (exchange === null || this.closed || this.socket === null || this.written) return;
    this.written = true;
    this.writtenAt = performance.now();
    const written = this.socket.write(exchange.payload);
    if (written < exchange.payloadBytes) this.unsent = Buffer.from(exchange.payload).subarray(Math.max(0, written));
  }

  onDrain(): void {
    if (!this.unsent || !this.socket) return;
    const written = this.socket.write(this.unsent);
    this.unsent = written < this.unsent.length ? this.unsent.subarray(Math.max(0, written)) : null;
  }

  onData(data: Buffer): void {
    const exchange = this.exchange;
    if (exchange === null || (!this.written && this.reused)) this.pool.unsolicited();
    if (exchange === null) return this.destroy(); // bytes on an idle connection: not ours to read
    // Bytes before the request went out answer no request of ours. On a pooled connection they were
    // sent while it sat idle: the connection is dropped and the request, unsent, goes on a new one.
    if (!this.written)
      return this.reused ? this.resendElsewhere(exchange) : this.breakOff(exchange, invalidAnswer(this.origin, "bytes before the request was sent"));
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
      if (mayResendAfter408(head.status, this, exchange)) return this.resendElsewhere(exchange);
      this.headBytes = null;
      this.head = head;
      this.remaining = head.length;
      this.chunked = head.framing === "chunked" ? new ChunkedDecoder() : null;
      this.reply = new Http1Reply(head.status, head.headers, this, head.framing === "until-close");
      exchange.answered(this.reply);
      if (head.framing === "empty" || (head.framing === "length" && head.length === 0)) this.complete(bytes.length > head.size);
      else if (bytes.length > head.size) this.onBody(bytes, head.size);
    } catch (err) {
      this.breakOff(exchange, invalidAnswer(this.origin, err instanceof ProtocolError ? err.message : String(err)));
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
    if (strayBytes) {
      this.pool.unsolicited();
      // Two answers to one request. On a new connection the first is this request's; on a reused
      // one either may be (the first may have been sent before the request arrived): neither is relayed.
      if (this.reused) return this.breakOff(this.exchange!, invalidAnswer(this.origin, "more than one answer to one request"));
    }
    // An upstream may answer before it has read the whole request (a 413, say): with request bytes
    // still unsent, the connection cannot carry another request.
    const keepAlive = this.head!.keepAlive && !strayBytes && this.unsent === null;
    this.exchange = null;
    this.head = null;
    this.reply = null;
    this.chunked = null;
    reply.end();
    this.resume();
    if (keepAlive && !this.closed && this.socket !== null) this.pool.released(this);
    else this.destroy();
  }

  /** Closes this connection and sends `exchange` again, on the new one its place opens. */
  private resendElsewhere(exchange: ConnectionExchange): void {
    if (this.written) exchange.resent = true;
    this.exchange = null;
    this.pool.sendFirst(exchange);
    this.destroy();
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
    const exchange = this.exchange;
    this.exchange = null;
    if (exchange !== null && !wasClosed) {
      // A body framed by the close ends with an orderly close; a reset cut it short.
      if (this.head?.framing === "until-close" && !error) this.reply!.end();
      else if (mayResendAfterClose(this, exchange, performance.now())) this.resendElsewhere(exchange);
      else {
        const failure = new UpstreamFailure(
          "broken",
          `upstream "${this.origin.name}" closed the connection ${this.head ? "in the middle of its answer" : "without answering"}`,
        );
        exchange.fail(failure);
        this.reply?.fail(failure);
      }
    }
    this.uncount();
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
    this.socket?.terminate();
    this.uncount();
  }

  /** Leaves the pool's count (once): its place may open a connection for a waiting exchange. */
  private uncount(): void {
    if (!this.counted) return;
    this.counted = false;
    this.pool.closed(this);
  }
}

function invalidAnswer(origin: Http1Origin, why: string): UpstreamFailure {
  return new UpstreamFailure("broken", `upstream "${origin.name}" sent an invalid answer: ${why}`);
}
