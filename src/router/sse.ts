/**
 * Relays an upstream's SSE stream to the client event by event, never holding more than one
 * incomplete event. On the way it captures the usage the upstream reports (we always ask for it),
 * drops that extra usage chunk when the client did not ask for it, and turns an upstream that
 * breaks or stalls mid-answer into an SSE error event in OpenAI's shape followed by `[DONE]`. A
 * stream that ends without `[DONE]` is whole only if the model said it finished (a finish_reason,
 * a usage-only chunk last, or its own error event); otherwise it ended unfinished, the same way.
 * Another API's stream (a native /v1/responses) is read as its StreamDialect says, and ends in its
 * own failure event.
 *
 * Invariants:
 * - a pull reads until it can enqueue something (or the stream ends): a pull that enqueued
 *   nothing would never be called again, and an event split over several reads would hang;
 * - the idle timeout counts only time spent waiting on the upstream: while the client is slow to
 *   read, no pull runs and the upstream is paused, which is not the upstream's silence;
 * - the stream timeout counts the whole stream, however steadily the upstream trickles (a byte a
 *   second, a comment every half second); past it the upstream is cut off and the request settled
 *   at once, and the client's next read gets the error ending;
 * - one incomplete event holds at most MAX_EVENT_CHARS: an upstream that never ends an event is
 *   cut off with an error event (memory and the rescans of what is pending stay bounded).
 */
import { readUsage, type Usage } from "./usage";
import { withoutSecrets } from "./upstream-text";

/**
 * An API's own event stream where it is not chat completions' (a native /v1/responses): how the
 * relay reads its usage and its end, and how it ends it when it breaks. Such a stream gets no
 * `[DONE]`, which is chat's alone.
 */
export interface StreamDialect {
  /** Matches an event (its text) that says the answer ended. */
  readonly finished: RegExp;
  /** The usage in an event's data (one that names a usage object), or null; `before` is the stream's so far (an API may report it in parts). */
  usage(data: Record<string, unknown>, before: Usage | null): Usage | null;
  /** The event a stream that broke ends with, in the API's shape. */
  failure(message: string): string;
}

export interface RelayOptions {
  /** The client set stream_options.include_usage itself; keep the usage chunk. */
  clientWantsUsage: boolean;
  idleTimeoutMs: number;
  /** The longest the whole stream may take. */
  streamTimeoutMs: number;
  /** Aborts the upstream request (idle timeout, client gone). */
  abortUpstream: (reason: string) => void;
  /**
   * Called exactly once when the stream ends, however it ends. The client's last bytes (the event
   * with [DONE], an error event) are handed on only once a promise it returns settles: the commit
   * of what the answer is charged.
   */
  onEnd: (result: RelayResult) => Promise<void> | void;
  /** The gateway's credentials for this upstream, taken out of the upstream's error events should one echo them. */
  upstreamSecrets?: readonly string[];
  /** The stream's API, when it is not chat completions. */
  dialect?: StreamDialect;
  /**
   * Rewrites the complete events about to be sent (the relay's own endings included) for the
   * client: a translation into another API's events, in the relay's own pull, with no stream
   * after it. "" sends nothing and reads on.
   */
  rewrite?: (events: string) => string;
}

export interface RelayResult {
  usage: Usage | null;
  /**
   * Events relayed to the client, [DONE] and a stripped usage chunk not counted: the completion
   * estimate when the upstream reported no usage.
   */
  events: number;
  /**
   * "unfinished": the upstream ended its stream cleanly, without [DONE], before the model said it
   * finished; "timeout": it had not finished within streamTimeoutMs.
   */
  outcome: "complete" | "upstream_error" | "unfinished" | "timeout" | "client_closed";
  error?: string;
  /**
   * The upstream's own error event, relayed as it came (`data: {"error": {...}}`, as vLLM sends
   * when generation fails mid-answer) but for the gateway's credentials: its data, or null when it sent none.
   */
  errorEvent: string | null;
}

const encoder = new TextEncoder();
const USAGE_PATTERN = /"usage"\s*:\s*\{/;
const DONE_TEXT = "data: [DONE]\n\n";
/** An event whose data is `[DONE]` (with or without the optional space, after other fields or not). */
const DONE = /(?:^|\n)data: ?\[DONE\][ \t]*(?:\n|$)/;
/** A choice's finish_reason that is set (a string, not null): the model finished that choice. */
const FINISHED = /"finish_reason"\s*:\s*"/;
/** The longest event accepted; chat events are a few hundred bytes. */
export const MAX_EVENT_CHARS = 1024 * 1024;

class EventTooLarge extends Error {}
class EndedUnfinished extends Error {}

/** How a stream ended, as the relay decides it (the rest of a RelayResult it keeps as it goes). */
type Ending = Omit<RelayResult, "usage" | "events" | "errorEvent">;

export function relaySse(upstream: ReadableStream<Uint8Array>, options: RelayOptions): ReadableStream<Uint8Array> {
  const reader = upstream.getReader();
  const dialect = options.dialect;
  const rewrite = options.rewrite;
  const finished = dialect?.finished ?? FINISHED;
  const decoder = new TextDecoder();
  let pending = "";
  /** A read that ended in "\r": held back, in case the next read starts with the "\n" of a CRLF. */
  let carriedCr = false;
  let usage: Usage | null = null;
  let upstreamErrorEvent: string | null = null;
  let events = 0;
  let sawDone = false;
  /** Signs that the answer ended, for a stream that ends without [DONE]: a finish_reason, and a usage-only chunk as the last data. */
  let finishSeen = false;
  let endedOnUsage = false;
  let ended = false;
  /** What onEnd returned: the commit the last bytes wait for. */
  let committed: Promise<void> | void;
  let stalled = false;
  let overdue = false;
  let waiting = false;
  const idle = setTimeout(() => {
    if (!waiting) return; // the client is slow, not the upstream; the next read re-arms the timer
    stalled = true;
    options.abortUpstream("idle");
  }, options.idleTimeoutMs);
  const overdueMessage = `the upstream did not finish its answer within ${options.streamTimeoutMs} ms`;
  const deadline = setTimeout(() => {
    overdue = true;
    options.abortUpstream("stream timeout");
    // A read in progress fails now and ends the stream; without one, the client is slow to read,
    // and the request is settled now rather than at its next read.
    if (!waiting) finish({ outcome: "timeout", error: overdueMessage });
  }, options.streamTimeoutMs);

  const finish = (result: Ending): Promise<void> | void => {
    if (ended) return committed;
    ended = true;
    clearTimeout(idle);
    clearTimeout(deadline);
    committed = options.onEnd({ usage, events, errorEvent: upstreamErrorEvent, ...result });
    return committed;
  };
  /** finish(), and the wait for what onEnd returned (also when the deadline already finished), before the last bytes go to the client. */
  const finishFirst = async (result: Ending): Promise<void> => {
    const commit = finish(result);
    if (commit) await commit;
  };

  /** Returns the text to forward for the complete events in `text`; keeps usage. */
  const filterEvents = (text: string): string => {
    let out = "";
    let start = 0;
    for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n", start)) {
      let event = text.slice(start, end + 2);
      start = end + 2;
      if (!finishSeen) finishSeen = finished.test(event);
      if (USAGE_PATTERN.test(event)) {
        const parsed = parseData(event);
        usage = (dialect ? parsed && dialect.usage(parsed, usage) : readUsage(parsed?.usage)) ?? usage;
        // The chunk that carries only usage (no choice, or no choices at all), not a content chunk with usage on it.
        const choices = parsed?.choices;
        endedOnUsage = parsed !== null && !(Array.isArray(choices) && choices.length > 0);
        // Chat's usage chunk only: another API's events are its own, usage or not.
        if (!options.clientWantsUsage && endedOnUsage && !dialect) continue;
      } else if (event.includes("data:")) endedOnUsage = false;
      // Cheap test first: only an event that names "error" is parsed for one.
      if (event.includes('"error"')) {
        if (options.upstreamSecrets) event = withoutSecrets(event, options.upstreamSecrets);
        const error = upstreamErrorEvent === null ? parseData(event)?.error : null;
        if (error !== null && typeof error === "object") upstreamErrorEvent = JSON.stringify(error);
      }
      out += event;
      if (DONE.test(event)) {
        // The end of the answer: nothing after it is relayed.
        sawDone = true;
        pending = "";
        return out;
      }
      events += 1;
    }
    pending = text.slice(start);
    return out;
  };

  /**
   * After [DONE] the client's stream is closed at once; what the upstream still sends (its final
   * chunk, nothing at all) is read and dropped, for at most idleTimeoutMs, so its connection can
   * be used again rather than cut.
   */
  const drainRest = (): void => {
    const stop = setTimeout(() => void reader.cancel().catch(() => {}), options.idleTimeoutMs);
    void (async () => {
      try {
        while (!(await reader.read()).done);
      } catch {}
      clearTimeout(stop);
    })();
  };

  /** Sends the client text of complete events (rewritten, when the endpoint translates); false when nothing was left to send. */
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, text: string): boolean => {
    const out = rewrite ? rewrite(text) : text;
    if (out.length > 0) controller.enqueue(encoder.encode(out));
    return out.length > 0;
  };

  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        for (;;) {
          idle.refresh();
          waiting = true;
          const { done, value } = await reader.read();
          waiting = false;
          if (done) {
            const rest = (pending + decoder.decode() + (carriedCr ? "\r" : "")).replaceAll("\r\n", "\n").trim();
            // An event the upstream did not end before closing counts if it is whole (some end their
            // last one without the blank line); one cut off mid-JSON means the answer broke.
            if (!sawDone && rest.includes("data:") && !DONE.test(rest) && parseData(rest) === null) throw new Error("cut off mid-event");
            const last = rest && !sawDone ? filterEvents(`${rest}\n\n`) : "";
            // Without [DONE] (some servers never send it) the answer is whole once the model said it
            // finished, or failed (its own error event). A server that crashed between events, its
            // stream framed by the connection's close, says neither.
            if (!sawDone && !finishSeen && !endedOnUsage && upstreamErrorEvent === null) {
              if (last) send(controller, last);
              throw new EndedUnfinished();
            }
            await finishFirst({ outcome: "complete" });
            if (last) send(controller, last);
            if (!sawDone && !dialect) send(controller, DONE_TEXT);
            controller.close();
            return;
          }
          const hadPending = pending !== "" || carriedCr;
          const decoded = decoder.decode(value, { stream: true });
          let text = carriedCr ? `\r${decoded}` : decoded;
          carriedCr = text.endsWith("\r");
          if (carriedCr) text = text.slice(0, -1);
          const out = filterEvents(pending + (text.includes("\r") ? text.replaceAll("\r\n", "\n") : text));
          if (pending.length > MAX_EVENT_CHARS) {
            if (out.length > 0) send(controller, out);
            throw new EventTooLarge();
          }
          if (out.length === 0 && !sawDone) continue; // only part of an event so far: read on
          if (sawDone) await finishFirst({ outcome: "complete" });
          // The common case: whole events, nothing dropped -> forward the upstream's bytes untouched.
          if (rewrite !== undefined) {
            if (!send(controller, out) && !sawDone) continue; // nothing to say yet: read on
          } else if (out.length > 0) controller.enqueue(!hadPending && out === decoded ? value : encoder.encode(out));
          if (sawDone) {
            controller.close();
            drainRest();
          }
          return;
        }
      } catch (err) {
        // Settled at the deadline already; the client's stream still gets its ending.
        if (ended && !overdue) return;
        if (sawDone) {
          // The answer was whole ([DONE] relayed); what broke after it is no failure.
          await finishFirst({ outcome: "complete" });
          controller.close();
          return;
        }
        const tooLarge = err instanceof EventTooLarge;
        if (tooLarge) {
          options.abortUpstream("event too large");
          pending = "";
        }
        const unfinished = err instanceof EndedUnfinished;
        const message = tooLarge
          ? `the upstream sent an event longer than ${MAX_EVENT_CHARS} characters`
          : unfinished ? "the upstream ended its stream"
          : overdue ? overdueMessage
          : stalled ? `the upstream sent nothing for ${options.idleTimeoutMs} ms` : "the upstream connection broke";
        await finishFirst({ outcome: unfinished ? "unfinished" : overdue ? "timeout" : "upstream_error", error: message });
        const why = `${message} before the answer was complete`;
        send(controller, dialect ? dialect.failure(why) : errorEvent(why));
        if (!dialect) send(controller, DONE_TEXT);
        controller.close();
      }
    },
    cancel(reason) {
      // Clients such as the openai SDK stop reading at [DONE]: by then the answer was whole.
      finish({ outcome: sawDone ? "complete" : "client_closed" });
      options.abortUpstream("client closed");
      return reader.cancel(reason).catch(() => {});
    },
  });
}

/** The JSON of an event's data: its `data:` lines joined by line breaks, as the SSE format says. */
function parseData(event: string): Record<string, unknown> | null {
  let data: string | null = null;
  for (const line of event.split("\n")) {
    if (!line.startsWith("data:")) continue;
    const value = line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
    data = data === null ? value : `${data}\n${value}`;
  }
  if (data === null) return null;
  try {
    const parsed: unknown = JSON.parse(data);
    return typeof parsed === "object" && parsed !== null ? (parsed as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

function errorEvent(message: string): string {
  const body = { error: { message, type: "api_error", param: null, code: "upstream_error" } };
  return `data: ${JSON.stringify(body)}\n\n`;
}
