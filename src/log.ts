/**
 * Structured JSON logs, one object per line. Service lines (start-up, shutdown, warnings) are
 * written at once; request lines, one per finished chat request, arrive in batches from the
 * request sink (./requests/sink.ts) and are written with one write per batch, so a request never
 * pays for formatting or a write. Lines below `[log] level` are dropped; `[log] requests = false`
 * drops request lines. A record carries identity kind and ids, never a credential.
 */
import type { RequestRecord } from "./requests/record";

export type LogLevel = "debug" | "info" | "warn" | "error";

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  log(level: LogLevel, msg: string, fields?: Record<string, unknown>): void;
  /** Writes one line per record, all in one write. */
  requests(records: RequestRecord[]): void;
}

export interface LoggerOptions {
  level: LogLevel;
  requests: boolean;
  /** Where lines go; default stdout (and stderr for warn and error service lines). */
  write?: (text: string, level: LogLevel) => void;
}

/**
 * Streams whose reader has gone (`modelgate serve | tee log` after tee died: EPIPE). Their lines
 * are dropped from then on: a log that cannot be written must not stop the API.
 */
const gone = new Set<NodeJS.WriteStream>();
for (const stream of [process.stdout, process.stderr]) stream.on?.("error", () => gone.add(stream));

function defaultWrite(text: string, level: LogLevel): void {
  const stream = level === "warn" || level === "error" ? process.stderr : process.stdout;
  if (gone.has(stream)) return;
  try {
    stream.write(text);
  } catch {
    gone.add(stream);
  }
}

export function createLogger(options: LoggerOptions): Logger {
  const threshold = RANK[options.level];
  const write = options.write ?? defaultWrite;
  const logRequests = options.requests && threshold <= RANK.warn;
  const times = new IsoTimes();
  const quote = memoQuote();

  function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
    if (RANK[level] < threshold) return;
    write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...fields })}\n`, level);
  }

  function requests(records: RequestRecord[]): void {
    if (!logRequests) return;
    let text = "";
    for (const r of records) {
      const level: LogLevel = r.status >= 500 ? "warn" : "info";
      if (RANK[level] >= threshold) text += `${requestLine(r, level, times.of(r.createdAt), quote)}\n`;
    }
    if (text) write(text, "info");
  }

  return { log, requests };
}

/** ISO-8601 times of epoch ms, remembering the last: records of one batch mostly share a millisecond. */
class IsoTimes {
  private ms = NaN;
  private iso = "";
  of(ms: number): string {
    if (ms !== this.ms) {
      this.ms = ms;
      this.iso = new Date(ms).toISOString();
    }
    return this.iso;
  }
}

/** JSON.stringify of strings from a small set (model and upstream names), remembered. */
function memoQuote(): (text: string) => string {
  const quoted = new Map<string, string>();
  return (text) => {
    let json = quoted.get(text);
    if (json === undefined) {
      if (quoted.size >= 1_000) quoted.clear();
      quoted.set(text, (json = JSON.stringify(text)));
    }
    return json;
  };
}

/**
 * One request as a JSON line, written as a template: every field is a number, null, or a string
 * the gateway made itself (ids, identity kind); the strings that come from config (model,
 * upstream) are JSON-quoted. Cheaper than stringifying an object per request.
 */
function requestLine(r: RequestRecord, level: LogLevel, time: string, quote: (text: string) => string): string {
  return (
    `{"time":"${time}","level":"${level}","msg":"request","request_id":"${r.requestId}",` +
    `"identity":"${r.identity}","user_id":${r.userId},"key_id":${r.keyId === null ? "null" : `"${r.keyId}"`},` +
    `"model":${quote(r.model)},"endpoint":"${r.endpoint}","upstream":${r.upstream === null ? "null" : quote(r.upstream)},` +
    `"status":${r.status},"prompt_tokens":${r.promptTokens},"completion_tokens":${r.completionTokens},"cost_micro":${r.costMicro},` +
    `"duration_ms":${hundredths(r.latencyMs)},"upstream_ms":${hundredths(r.upstreamMs)},"overhead_ms":${hundredths(r.latencyMs - r.upstreamMs)}}`
  );
}

const TWO_DIGITS = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, "0"));

/** Milliseconds with two decimals ("12.30"), from integers: formatting a fraction costs far more. Negative is 0. */
export function hundredths(ms: number): string {
  const n = Math.max(0, Math.round(ms * 100));
  const cents = n % 100;
  return `${(n - cents) / 100}.${TWO_DIGITS[cents]}`;
}

let current: Logger | null = null;

/** The process-wide logger; `serve` installs one built from `[log]`. Before that (or after null): info, stdout. */
export function setLogger(logger: Logger | null): void {
  current = logger;
}

export function log(level: LogLevel, msg: string, fields: Record<string, unknown> = {}): void {
  current ??= createLogger({ level: "info", requests: false });
  current.log(level, msg, fields);
}
