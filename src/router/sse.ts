/**
 * Relays an upstream's SSE stream to the client event by event, never holding more than one
 * incomplete event. On the way it captures the usage the upstream reports (we always ask for it),
 * drops that extra usage chunk when the client did not ask for it, and turns an upstream that
 * breaks or stalls mid-answer into an SSE error event in OpenAI's shape followed by `[DONE]`. A
 * stream that ends without `[DONE]` is whole only if the model said it finished (a finish_reason,
 * a usage-only chunk last, or its own error event); otherwise it ended unfinished, the same way.
 * Another API's stream (a native /v1/responses) is read as its StreamDialect says, and ends in its
 * own failure event. A translating endpoint's StreamRewrite turns the events into its API's as they
 * are sent, in the same pull (./sse-events.ts holds the event-level reading; ./relay-options.ts
 * what a caller passes and gets back).
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
import { readUsage, type Usage } from "../credits/cost";
import { withoutSecrets } from "./upstream-redaction";
import { DONE, DONE_TEXT, errorEvent, FINISHED, parseData, USAGE_PATTERN } from "./sse-events";
import type { RelayOptions, RelayResult } from "./relay-options";

const encoder = new TextEncoder();
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
  const keepalive = rewrite?.keepalive;
  /** The client's stream, for the keepalive, which writes between pulls. */
  let client: ReadableStreamDefaultController<Uint8Array> | null = null;
  const beat =
    keepalive === undefined
      ? undefined
      : setTimeout(() => {
          if (!waiting || ended) return; // the client is slow, not the upstream; the next read re-arms it
          client?.enqueue(encoder.encode(keepalive.event()));
          beat!.refresh();
        }, keepalive.everyMs);
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
    clearTimeout(beat);
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
    const out = rewrite ? rewrite.events(text) : text;
    if (out.length > 0) controller.enqueue(encoder.encode(out));
    return out.length > 0;
  };

  return new ReadableStream<Uint8Array>({
    start(controller) {
      client = controller;
      if (rewrite?.opening) controller.enqueue(encoder.encode(rewrite.opening));
    },
    async pull(controller) {
      try {
        for (;;) {
          idle.refresh();
          beat?.refresh();
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
          : unfinished
            ? "the upstream ended its stream"
            : overdue
              ? overdueMessage
              : stalled
                ? `the upstream sent nothing for ${options.idleTimeoutMs} ms`
                : "the upstream connection broke";
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
