/**
 * Structured JSON logs, one object per line. Service lines (start-up, shutdown, warnings) are
 * written at once; request lines, one per finished chat request, are queued as the records
 * themselves and serialised and written in one batch every `flushMs` or as soon as BATCH_LINES
 * wait. A request never pays for JSON.stringify or a write, and under load a queued record is
 * written before a young-generation collection would have to keep it. Lines below `[log] level`
 * are dropped; `[log] requests = false` drops request lines. A record carries identity kind and
 * ids, never a credential.
 */
import type { RequestRecord } from "./deps";

export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };
const BATCH_LINES = 256;

export interface Logger {
  log(level: LogLevel, msg: string, fields?: Record<string, unknown>): void;
  /** Queues one request line; the line is built and written later, off the request path. */
  request(record: RequestRecord): void;
  flush(): void;
  close(): void;
}

export interface LoggerOptions {
  level: LogLevel;
  requests: boolean;
  /** Where lines go; default stdout (and stderr for warn and error service lines). */
  write?: (text: string, level: LogLevel) => void;
  flushMs?: number;
  /** Request lines held at most; beyond it lines are dropped and counted. */
  maxQueue?: number;
}

function defaultWrite(text: string, level: LogLevel): void {
  if (level === "warn" || level === "error") process.stderr.write(text);
  else process.stdout.write(text);
}

export function createLogger(options: LoggerOptions): Logger {
  const threshold = RANK[options.level];
  const write = options.write ?? defaultWrite;
  const maxQueue = options.maxQueue ?? 10_000;
  const logRequests = options.requests && threshold <= RANK.warn;
  let queue: RequestRecord[] = [];
  let dropped = 0;

  function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (RANK[level] < threshold) return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`, level);
  }

  function flush(): void {
    if (queue.length === 0 && dropped === 0) return;
    const records = queue;
    queue = [];
    let text = "";
    for (const r of records) {
      const level: LogLevel = r.status >= 500 ? "warn" : "info";
      if (RANK[level] >= threshold) text += `${requestLine(r, level)}\n`;
    }
    if (dropped > 0) {
      text += `${JSON.stringify({ time: new Date().toISOString(), level: "warn", msg: `log queue full: ${dropped} request line(s) dropped` })}\n`;
      dropped = 0;
    }
    if (text) write(text, "info");
  }

  const timer = setInterval(flush, options.flushMs ?? 100);
  timer.unref?.();

  return {
    log,
    request(record) {
      if (!logRequests) return;
      if (queue.length >= maxQueue) dropped += 1;
      else if (queue.push(record) === BATCH_LINES) queueMicrotask(flush);
    },
    flush,
    close() {
      clearInterval(timer);
      flush();
    },
  };
}

/**
 * One request as a JSON line, written as a template: every field is a number, null, or a string
 * the gateway made itself (ids, identity kind); the strings that come from config (model,
 * upstream) go through JSON.stringify. Cheaper than stringifying an object per request.
 */
function requestLine(r: RequestRecord, level: LogLevel): string {
  return `{"time":"${new Date(r.createdAt).toISOString()}","level":"${level}","msg":"request","request_id":"${r.requestId}",`
    + `"identity":"${r.identity}","user_id":${r.userId},"key_id":${r.keyId === null ? "null" : `"${r.keyId}"`},`
    + `"model":${JSON.stringify(r.model)},"upstream":${r.upstream === null ? "null" : JSON.stringify(r.upstream)},`
    + `"status":${r.status},"prompt_tokens":${r.promptTokens},"completion_tokens":${r.completionTokens},"cost_micro":${r.costMicro},`
    + `"duration_ms":${round(r.latencyMs)},"upstream_ms":${round(r.upstreamMs)},"overhead_ms":${round(Math.max(0, r.latencyMs - r.upstreamMs))}}`;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

let current: Logger | null = null;

/** The process-wide logger; `serve` installs one built from `[log]`. Before that: info, stdout. */
export function setLogger(logger: Logger): void {
  current = logger;
}

export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  current ??= createLogger({ level: "info", requests: false });
  current.log(level, msg, fields);
}
