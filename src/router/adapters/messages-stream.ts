/**
 * A chat completions stream, as the relay hands it on (../sse.ts: usage read, its own error
 * ending in OpenAI's shape, `[DONE]` last), rewritten as an Anthropic Messages stream by the pure
 * translator (../../translate/anthropic-stream.ts). `message_start` goes out at once, so the
 * client's first byte does not wait for the model's; while the upstream sends nothing for
 * PING_INTERVAL_MS a `ping` event goes out, as Anthropic's own streams do, so clients and proxies
 * that drop a silent connection keep it. An error event (the upstream's or the relay's) ends the
 * stream with Anthropic's `error` event.
 */
import { createMessagesStream } from "../../translate/anthropic-stream";
import { isRecord } from "../../translate/chat";

/** The longest a translated stream stays silent: a `ping` then, and again after each such silence. */
const PING_INTERVAL_MS = 10_000;

const encoder = new TextEncoder();
/** Shared: it decodes whole events only, so it keeps no state between calls. */
const decoder = new TextDecoder();

export interface TranslatedStreamOptions {
  /** The model the client named. */
  model: string;
  stopSequences: readonly string[];
  pingIntervalMs?: number;
}

export function messagesFromChatStream(chat: ReadableStream<Uint8Array>, options: TranslatedStreamOptions): ReadableStream<Uint8Array> {
  const reader = chat.getReader();
  const events = createMessagesStream({ model: options.model, id: `msg_${crypto.randomUUID().replaceAll("-", "")}`, stopSequences: options.stopSequences });
  let pending = "";
  let ended = false;
  let timer: ReturnType<typeof setTimeout> | undefined;

  /** The Anthropic events for the complete chat events in `text`; keeps the incomplete rest. */
  const translate = (text: string): string => {
    let out = "";
    let start = 0;
    for (let end = text.indexOf("\n\n"); end !== -1; end = text.indexOf("\n\n", start)) {
      out += translateEvent(text.slice(start, end));
      start = end + 2;
    }
    pending = text.slice(start);
    return out;
  };
  const translateEvent = (event: string): string => {
    const at = event.indexOf("data:");
    if (at === -1) return "";
    const data = event.slice(event.charCodeAt(at + 5) === 32 ? at + 6 : at + 5).trim();
    if (data === "[DONE]") return events.end();
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return "";
    }
    if (!isRecord(parsed)) return "";
    if (isRecord(parsed.error)) return events.fail(typeof parsed.error.message === "string" ? parsed.error.message : "the upstream reported an error");
    return events.chunk(parsed);
  };
  const stop = (): void => {
    ended = true;
    clearTimeout(timer);
  };

  return new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(encoder.encode(events.start()));
      // Refreshed by every read from the upstream, so it fires only after a silence; a ping may
      // be queued while a pull waits on the upstream (a pending pull is no obstacle to enqueue).
      timer = setTimeout(function ping() {
        if (ended) return;
        controller.enqueue(encoder.encode(events.ping()));
        timer!.refresh();
      }, options.pingIntervalMs ?? PING_INTERVAL_MS);
    },
    async pull(controller) {
      for (;;) {
        let got: Awaited<ReturnType<typeof reader.read>>;
        try {
          got = await reader.read();
        } catch {
          // The relay ends every failure with an error event and closes; this is only a guard.
          stop();
          controller.enqueue(encoder.encode(events.fail("the upstream connection broke before the answer was complete")));
          controller.close();
          return;
        }
        timer!.refresh();
        if (got.done) {
          stop();
          const rest = pending;
          const out = (rest.trim() ? translate(`${rest}\n\n`) : "") + events.end();
          if (out) controller.enqueue(encoder.encode(out));
          controller.close();
          return;
        }
        // The relay hands on whole events only, so a read never ends inside a character.
        const text = decoder.decode(got.value);
        const out = translate(pending + (text.includes("\r") ? text.replaceAll("\r\n", "\n") : text));
        if (out) {
          controller.enqueue(encoder.encode(out));
          return;
        }
      }
    },
    cancel(reason) {
      stop();
      return reader.cancel(reason).catch(() => {});
    },
  });
}
