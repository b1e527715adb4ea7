/**
 * The answer of one HTTP/1.1 exchange as its reader sees it. Body bytes are kept until the reader
 * chooses text() or body(); an answer that arrived whole is turned into text without waiting.
 * The connection pushes bytes, then ends or fails the reply exactly once.
 */
import type { Connection } from "./http1";
import { UpstreamFailure, type UpstreamReply } from "./upstream-client";

/** Chunks a streamed body may queue for a slow reader before the socket is paused. */
const STREAM_HIGH_WATER = 16;

export class Http1Reply implements UpstreamReply {
  private chunks: Buffer[] = [];
  private ended = false;
  private failure: UpstreamFailure | null = null;
  private waiter: { resolve: (text: string) => void; reject: (failure: UpstreamFailure) => void } | null = null;
  private controller: ReadableStreamDefaultController<Uint8Array> | null = null;

  constructor(
    readonly status: number,
    private readonly headers: Record<string, string>,
    private readonly conn: Connection,
  ) {}

  get complete(): boolean {
    return this.ended;
  }

  header(name: string): string | null {
    return this.headers[name] ?? null;
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

  push(data: Buffer): void {
    const controller = this.controller;
    if (controller === null) {
      this.chunks.push(data);
      return;
    }
    controller.enqueue(data);
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
    this.waiter?.reject(failure);
    this.controller?.error(failure);
    this.controller = null;
  }

  private takeText(): string {
    const chunks = this.chunks;
    this.chunks = [];
    return chunks.length === 1 ? chunks[0].toString("utf8") : Buffer.concat(chunks).toString("utf8");
  }
}
