/**
 * The answer of one HTTP/1.1 exchange as its reader sees it. Body bytes are kept until the reader
 * chooses text() or body(); an answer that arrived whole is turned into text without waiting.
 * The connection pushes bytes as (buffer, start, end), so a body that shares its packet with the
 * head is read in place; then it ends or fails the reply exactly once.
 */
import { answerTooLarge, MAX_ANSWER_BYTES, UpstreamFailure, type UpstreamReply } from "./exchange";
import type { HeaderBlock } from "./http1-parse";
import type { ExchangeConnection } from "./http1-types";

/** Chunks a streamed body may queue for a slow reader before the socket is paused. */
const STREAM_HIGH_WATER = 16;

export class Http1Reply implements UpstreamReply {
  private chunks: Buffer[] = [];
  /** The first piece pushed, kept in place until a second one arrives or a stream takes it. */
  private first: Buffer | null = null;
  private firstStart = 0;
  private firstEnd = 0;
  /** Bytes pushed while no stream was reading them (bounded by MAX_ANSWER_BYTES). */
  private heldBytes = 0;
  private ended = false;
  private failure: UpstreamFailure | null = null;
  private waiter: { resolve: (text: string) => void; reject: (failure: UpstreamFailure) => void } | null = null;
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;

  constructor(
    readonly status: number,
    private readonly headers: HeaderBlock,
    private readonly conn: ExchangeConnection,
    readonly closeDelimited: boolean,
  ) {}

  textNow(): string | null {
    return this.ended ? this.takeText() : null;
  }

  header(name: string): string | null {
    return this.headers.get(name);
  }

  text(): Promise<string> {
    if (this.ended) return Promise.resolve(this.takeText());
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  body(): ReadableStream<Uint8Array> {
    return new ReadableStream<Uint8Array>(
      {
        start: (controller) => {
          this.spillFirst();
          for (const chunk of this.chunks) controller.enqueue(chunk);
          this.chunks = [];
          if (this.ended) controller.close();
          else if (this.failure) controller.error(this.failure);
          else this.controller = controller;
        },
        pull: () => this.conn.resume(),
        cancel: () => {
          this.controller = null;
          const exchange = this.conn.exchange;
          // Once ended, the connection may already carry another exchange: leave it alone.
          if (!this.ended && !this.failure && exchange) this.conn.breakOff(exchange, new UpstreamFailure("aborted", "the body was cancelled"));
        },
      },
      { highWaterMark: STREAM_HIGH_WATER },
    );
  }

  /** Bytes start..end of `data` belong to the body. */
  push(data: Buffer, start: number, end: number): void {
    const controller = this.controller;
    if (controller === null) {
      this.heldBytes += end - start;
      if (this.heldBytes > MAX_ANSWER_BYTES) {
        const exchange = this.conn.exchange;
        if (exchange) this.conn.breakOff(exchange, answerTooLarge(this.conn.origin.name));
        return;
      }
      if (this.first === null && this.chunks.length === 0) {
        this.first = data;
        this.firstStart = start;
        this.firstEnd = end;
      } else {
        this.spillFirst();
        this.chunks.push(piece(data, start, end));
      }
      return;
    }
    controller.enqueue(piece(data, start, end));
    if ((controller.desiredSize ?? 1) <= 0) this.conn.pause();
  }

  end(): void {
    if (this.ended || this.failure) return;
    this.ended = true;
    if (this.waiter) this.waiter.resolve(this.takeText());
    this.controller?.close();
    this.controller = null;
  }

  fail(failure: UpstreamFailure): void {
    if (this.ended || this.failure) return;
    this.failure = failure;
    this.chunks = [];
    this.first = null;
    this.waiter?.reject(failure);
    this.controller?.error(failure);
    this.controller = null;
  }

  private takeText(): string {
    const first = this.first;
    if (first !== null) {
      this.first = null;
      return first.toString("utf8", this.firstStart, this.firstEnd);
    }
    const chunks = this.chunks;
    this.chunks = [];
    return chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8");
  }

  /** Moves the piece kept in place to the head of `chunks`. */
  private spillFirst(): void {
    if (this.first === null) return;
    this.chunks.unshift(piece(this.first, this.firstStart, this.firstEnd));
    this.first = null;
  }
}

function piece(data: Buffer, start: number, end: number): Buffer {
  return start === 0 && end === data.length ? data : data.subarray(start, end);
}
