/**
 * A chat completions stream, as the relay sends it (../sse.ts: usage read, its own error ending in
 * OpenAI's shape, `[DONE]` last), rewritten as an Anthropic Messages stream by the pure translator
 * (../../translate/anthropic-stream.ts), in the relay's own pull (a StreamRewrite). `message_start`
 * is the stream's opening, so the client's first byte does not wait for the model's; while the
 * relay waits PING_INTERVAL_MS on a silent upstream a `ping` event goes out (the relay's
 * keepalive), as Anthropic's own streams do, so clients and proxies that drop a silent connection
 * keep it. An error event (the upstream's or the relay's) ends the stream with Anthropic's `error`
 * event.
 */
import { createMessagesStream } from "../../translate/anthropic-stream";
import { isRecord } from "../../translate/chat";
import { mapEventData, type StreamRewrite } from "../sse-events";

/** The longest a translated stream stays silent: a `ping` then, and again after each such silence. */
const PING_INTERVAL_MS = 10_000;

export interface TranslatedStreamOptions {
  /** The model the client named. */
  model: string;
  stopSequences: readonly string[];
  pingIntervalMs?: number;
}

/** The rewriter of one call's complete chat events into Messages events. */
export function messagesFromChatEvents(options: TranslatedStreamOptions): StreamRewrite {
  const events = createMessagesStream({ model: options.model, id: `msg_${crypto.randomUUID().replaceAll("-", "")}`, stopSequences: options.stopSequences });

  /** The Messages events for one chat event's data. */
  const translate = (data: string): string => {
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

  return {
    opening: events.start(),
    events: (text) => mapEventData(text, translate),
    keepalive: { everyMs: options.pingIntervalMs ?? PING_INTERVAL_MS, event: () => events.ping() },
  };
}
