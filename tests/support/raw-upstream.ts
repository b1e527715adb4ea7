/**
 * A raw upstream for the HTTP/1.1 client tests (src/router/http1.ts): loopback TCP servers started
 * with Bun.listen, so every byte the "upstream" sends (and when) is chosen by the test. It accepts
 * connections, splits the byte stream into requests (head + Content-Length body) and hands each to
 * the test's handler, which writes whatever bytes it likes. Plus the helpers those tests share.
 * Test files call cleanUp() from afterEach.
 */
import { expect } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { closeIdleConnections, http1Post, type Http1Origin } from "../../src/router/http1";
import { UpstreamFailure, type FailureKind, type UpstreamReply } from "../../src/router/exchange";

/** Every socket test must finish well within this; a hang fails fast instead of after 60 s. */
export const T = 2_000;
/** Pause between two writes meant to reach the client as separate packets. */
const GAP_MS = 5;

export interface ServerRequest {
  conn: ServerConn;
  /** Position of this request among all requests the upstream received, from 0. */
  index: number;
  /** The request exactly as received: head, blank line and body. */
  raw: Buffer;
  head: string;
  body: Buffer;
}

export type Handler = (req: ServerRequest) => void | Promise<void>;

export class ServerConn {
  received = Buffer.alloc(0);
  requests: ServerRequest[] = [];
  isClosed = false;
  readonly closed: Promise<void>;
  private markClosed!: () => void;
  private pending = Buffer.alloc(0);
  private headsSeen = 0;
  private queue: Buffer[] = [];
  private flushWaiters: Array<() => void> = [];
  private chain: Promise<void> = Promise.resolve();

  constructor(
    readonly upstream: Upstream,
    readonly socket: Socket<ServerConn>,
    readonly index: number,
  ) {
    this.closed = new Promise((resolve) => (this.markClosed = resolve));
  }

  /** Bytes written by the handler that the kernel has not taken yet. */
  get unflushed(): number {
    return this.queue.reduce((sum, b) => sum + b.length, 0);
  }

  /** Queues `data` as one socket write; resolves once the kernel has taken all of it. */
  write(data: string | Uint8Array): Promise<void> {
    this.queue.push(typeof data === "string" ? Buffer.from(data) : Buffer.from(data));
    this.flush();
    return this.queue.length === 0 ? Promise.resolve() : new Promise((resolve) => this.flushWaiters.push(resolve));
  }

  /** Writes each part separately with a short pause between them, so they travel as separate packets. */
  async writeSlowly(parts: Array<string | Uint8Array>): Promise<void> {
    for (let i = 0; i < parts.length; i++) {
      if (i > 0) await Bun.sleep(GAP_MS);
      await this.write(parts[i]);
    }
  }

  /** Graceful close (FIN) once everything written has been handed to the kernel. */
  async end(): Promise<void> {
    await this.write(Buffer.alloc(0));
    this.socket.end();
  }

  /** Abrupt close (RST). */
  terminate(): void {
    this.socket.terminate();
  }

  flush(): void {
    while (this.queue.length > 0) {
      const next = this.queue[0];
      if (next.length === 0) {
        this.queue.shift();
        continue;
      }
      const written = this.socket.write(next);
      if (written < next.length) {
        this.queue[0] = next.subarray(Math.max(0, written));
        return;
      }
      this.queue.shift();
    }
    for (const resolve of this.flushWaiters.splice(0)) resolve();
  }

  onData(data: Buffer): void {
    this.received = Buffer.concat([this.received, data]);
    this.pending = Buffer.concat([this.pending, data]);
    for (;;) {
      const end = this.pending.indexOf("\r\n\r\n");
      if (end === -1) break;
      const head = this.pending.toString("latin1", 0, end + 4);
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (this.headsSeen === this.requests.length) {
        this.headsSeen += 1;
        this.upstream.onHead?.(this, head);
      }
      if (this.pending.length < end + 4 + length) break;
      const raw = this.pending.subarray(0, end + 4 + length);
      this.pending = this.pending.subarray(raw.length);
      const req: ServerRequest = { conn: this, index: this.upstream.requests.length, raw, head, body: raw.subarray(end + 4) };
      this.requests.push(req);
      this.upstream.requests.push(req);
      const handler = this.upstream.handler;
      this.chain = this.chain.then(() => handler(req));
    }
    this.upstream.notify();
  }

  onClose(): void {
    this.isClosed = true;
    this.markClosed();
    this.upstream.notify();
  }
}

export class Upstream {
  readonly listener: TCPSocketListener<ServerConn>;
  readonly conns: ServerConn[] = [];
  readonly requests: ServerRequest[] = [];
  readonly origin: Http1Origin;
  private waiters: Array<{ ready: () => boolean; resolve: () => void }> = [];
  /** Called as soon as a request's head has arrived, before its body is complete. */
  onHead: ((conn: ServerConn, head: string) => void) | null = null;

  constructor(public handler: Handler) {
    this.listener = Bun.listen<ServerConn>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open: (socket) => {
          const conn = new ServerConn(this, socket, this.conns.length);
          socket.data = conn;
          this.conns.push(conn);
          this.notify();
        },
        data: (socket, data) => socket.data.onData(data),
        drain: (socket) => socket.data.flush(),
        close: (socket) => socket.data?.onClose(),
        error: (socket) => socket.data?.onClose(),
      },
    });
    this.origin = originFor(this.listener.port);
  }

  get port(): number {
    return this.listener.port;
  }

  /** Resolves once `ready()` holds, re-checked on every server event (no polling on a clock). */
  until(ready: () => boolean): Promise<void> {
    if (ready()) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ ready, resolve }));
  }

  notify(): void {
    this.waiters = this.waiters.filter((w) => {
      if (!w.ready()) return true;
      w.resolve();
      return false;
    });
  }

  stop(): void {
    this.listener.stop(true);
  }
}

const started: Upstream[] = [];
const cleanups: Array<() => void> = [];

export function upstream(handler: Handler): Upstream {
  const server = new Upstream(handler);
  started.push(server);
  return server;
}

/** Registers something to undo after the current test (run by cleanUp()). */
export function onCleanup(cleanup: () => void): void {
  cleanups.push(cleanup);
}

/** Closes idle client connections, stops every upstream started and runs registered cleanups. */
export function cleanUp(): void {
  closeIdleConnections();
  while (started.length) started.pop()!.stop();
  while (cleanups.length) cleanups.pop()!();
}

export function originFor(port: number, overrides: Partial<Http1Origin> = {}): Http1Origin {
  return {
    hostname: "127.0.0.1",
    port,
    requestHead: `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\n`,
    connectTimeoutMs: 1_000,
    maxConnections: 64,
    name: "raw",
    ...overrides,
  };
}

/** A complete answer with a Content-Length body. */
export function answer(body: string, extraHeaders = "", status = "200 OK", version = "1.1"): string {
  return `HTTP/${version} ${status}\r\ncontent-type: application/json\r\n${extraHeaders}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

/** Posts and reads the whole answer as text. */
export async function post(origin: Http1Origin, body = "{}"): Promise<{ reply: UpstreamReply; text: string }> {
  const reply = await http1Post(origin, body).reply;
  return { reply, text: await reply.text() };
}

/** The UpstreamFailure a promise rejects with (fails the test if it resolves or rejects otherwise). */
export async function failureOf(promise: Promise<unknown>): Promise<UpstreamFailure> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (err) {
    expect(err).toBeInstanceOf(UpstreamFailure);
    return err as UpstreamFailure;
  }
  throw new Error(`expected an UpstreamFailure, but it resolved with ${JSON.stringify(outcome)?.slice(0, 200)}`);
}

export async function expectFailure(promise: Promise<unknown>, kind: FailureKind): Promise<UpstreamFailure> {
  const failure = await failureOf(promise);
  expect(failure.kind).toBe(kind);
  return failure;
}

/** Reads a stream to its end, keeping every piece as handed out (no copies). */
export async function readPieces(stream: ReadableStream<Uint8Array>, between?: () => Promise<void>): Promise<Uint8Array[]> {
  const pieces: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return pieces;
    pieces.push(value);
    if (between) await between();
  }
}

export function joined(pieces: Uint8Array[]): string {
  return Buffer.concat(pieces).toString("utf8");
}

export function chunk(data: string): string {
  return `${Buffer.byteLength(data).toString(16)}\r\n${data}\r\n`;
}
