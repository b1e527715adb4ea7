/**
 * The one connection a process keeps to `[cluster] redis_url` (Bun's built-in client, no other
 * driver), and a second one for pub/sub (a subscribed connection takes no other commands).
 * Invariants:
 * - a command never waits for a connection: while the link is down it is refused at once, and one
 *   that takes longer than `timeoutMs` is refused then, so a caller can answer 503 and never
 *   hang or fall back to unlimited;
 * - the link mends itself: Bun's own reconnection gives up after a few tries, so it is off, and
 *   this module dials again every RECONNECT_MS for as long as Redis stays away;
 * - subscriptions are made again on every new connection, and `onReconnect` listeners are told,
 *   since messages published while the link was down are lost (a cache must forget what it held).
 */
import { RedisClient } from "bun";

const RECONNECT_MS = 250;

export class RedisUnavailable extends Error {
  override readonly name = "RedisUnavailable";
}

interface RedisLinkStatus {
  connected: boolean;
  /** Epoch ms the link last went down, while it is down. */
  down_since: number | null;
  last_error: string | null;
}

export interface RedisLink {
  /** One command; rejects with RedisUnavailable when the link is down or the answer is late. */
  send(command: string, args: string[]): Promise<unknown>;
  /** Calls `listener` with each message on `channel`, over every connection to come. */
  subscribe(channel: string, listener: (message: string) => void): void;
  /** After the link comes back up (messages sent meanwhile are lost). */
  onReconnect(listener: () => void): void;
  /** When a working link goes down, with the reason. */
  onDown(listener: (reason: string) => void): void;
  /** Resolves once connected (or rejects after `timeoutMs`): start-up waits for it to say so in the log. */
  ready(): Promise<void>;
  status(): RedisLinkStatus;
  close(): void;
}

export interface RedisLinkOptions {
  timeoutMs: number;
  now?: () => number;
}

/** A URL's scheme and host only, for logs and errors: the rest may carry a password. */
export function describeRedisUrl(url: string): string {
  const parsed = URL.parse(url);
  return parsed === null ? "redis" : `${parsed.protocol}//${parsed.host}`;
}

export function createRedisLink(url: string, options: RedisLinkOptions): RedisLink {
  const now = options.now ?? Date.now;
  const subscriptions = new Map<string, (message: string) => void>();
  const reconnected: Array<() => void> = [];
  const downs: Array<(reason: string) => void> = [];
  let closed = false;
  let everConnected = false;
  let downSince: number | null = now();
  let lastError: string | null = null;
  let client: RedisClient | null = null;
  let subscriber: RedisClient | null = null;
  let dialing: Promise<void> | null = null;
  let retry: ReturnType<typeof setTimeout> | null = null;

  const clientOptions = { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: options.timeoutMs, enableAutoPipelining: true };

  function wentDown(error: unknown): void {
    lastError = String((error as Error)?.message ?? error).split("\n")[0];
    if (downSince === null) {
      downSince = now();
      for (const listener of downs) listener(lastError);
    }
    for (const c of [client, subscriber]) {
      if (c === null) continue;
      c.onclose = null;
      c.close();
    }
    client = subscriber = null;
    scheduleDial();
  }

  function scheduleDial(): void {
    if (closed || retry !== null || dialing !== null) return;
    retry = setTimeout(() => {
      retry = null;
      // A failed dial has scheduled the next one (wentDown); nobody else waits for this one.
      dial().catch(() => {});
    }, RECONNECT_MS);
    retry.unref?.();
  }

  function dial(): Promise<void> {
    if (dialing !== null) return dialing;
    dialing = (async () => {
      const main = new RedisClient(url, clientOptions);
      const sub = new RedisClient(url, clientOptions);
      try {
        await Promise.all([main.connect(), sub.connect()]);
        for (const [channel, listener] of subscriptions) await sub.subscribe(channel, listener);
      } catch (error) {
        main.close();
        sub.close();
        throw error;
      }
      if (closed) {
        main.close();
        sub.close();
        return;
      }
      client = main;
      subscriber = sub;
      main.onclose = sub.onclose = (error: Error) => wentDown(error ?? new Error("connection closed"));
      const recovered = everConnected;
      everConnected = true;
      downSince = null;
      lastError = null;
      if (recovered) for (const listener of reconnected) listener();
    })().then(
      () => {
        dialing = null;
      },
      (error) => {
        dialing = null;
        wentDown(error);
        throw new RedisUnavailable(`Redis at ${describeRedisUrl(url)} did not answer: ${lastError}`);
      },
    );
    return dialing;
  }

  return {
    send(command, args) {
      if (client === null) {
        scheduleDial();
        return Promise.reject(new RedisUnavailable(`Redis at ${describeRedisUrl(url)} is not connected${lastError ? `: ${lastError}` : ""}`));
      }
      const sent = client.send(command, args);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          const error = new RedisUnavailable(`Redis at ${describeRedisUrl(url)} did not answer within ${options.timeoutMs} ms`);
          // A server that stops answering is treated as gone: the next dial finds out whether it is back.
          wentDown(error);
          reject(error);
        }, options.timeoutMs);
      });
      return Promise.race([sent, late]).then(
        (value) => {
          clearTimeout(timer);
          return value;
        },
        (error) => {
          clearTimeout(timer);
          throw error instanceof RedisUnavailable
            ? error
            : new RedisUnavailable(`Redis at ${describeRedisUrl(url)} refused a command: ${String((error as Error)?.message ?? error).split("\n")[0]}`);
        },
      );
    },
    subscribe(channel, listener) {
      subscriptions.set(channel, listener);
      if (subscriber !== null) subscriber.subscribe(channel, listener).catch(wentDown);
    },
    onReconnect(listener) {
      reconnected.push(listener);
    },
    onDown(listener) {
      downs.push(listener);
    },
    ready() {
      if (client !== null) return Promise.resolve();
      return dial();
    },
    status: () => ({ connected: client !== null, down_since: downSince, last_error: lastError }),
    close() {
      closed = true;
      if (retry !== null) clearTimeout(retry);
      for (const c of [client, subscriber]) {
        if (c === null) continue;
        c.onclose = null;
        c.close();
      }
      client = subscriber = null;
    },
  };
}
