/**
 * A chat completions stream, as the relay (../sse.ts) sends it, rewritten as a Responses stream
 * by the translator's state machine (src/translate/responses-stream.ts), in the relay's own pull
 * (RelayOptions.rewrite): response.created and response.in_progress with the first chunk's
 * events, each chunk's events as it comes, then response.completed at the chat stream's `[DONE]`.
 * An error event (the upstream's own, or the relay's ending of a stream that broke) becomes
 * response.failed. The relay ends every chat stream with one or the other.
 */
import { createResponsesStream } from "../../translate/responses-stream";
import { isRecord } from "../../translate/chat";
import { mapEventData, type StreamRewrite } from "../sse-events";
import type { ResponseObject } from "../../translate/responses-answer";
import type { ResponseEcho } from "../../translate/responses-request";

export interface TranslatedStreamOptions {
  /** The model the client named. */
  model: string;
  id: string;
  echo: ResponseEcho;
  /** The final Response object of a stream that completed (for `store`). */
  onCompleted: (response: ResponseObject) => void;
}

/** The rewriter of one call's complete chat events into Responses events. */
export function translatedEvents(options: TranslatedStreamOptions): StreamRewrite {
  const translator = createResponsesStream({ model: options.model, id: options.id, echo: options.echo });

  /** The Responses events for one chat event's data. */
  const translate = (data: string): string => {
    if (data === "[DONE]") {
      const out = translator.end();
      const response = translator.response();
      if (response !== null) options.onCompleted(response);
      return out;
    }
    let chunk: unknown;
    try {
      chunk = JSON.parse(data);
    } catch {
      return "";
    }
    if (!isRecord(chunk)) return "";
    if (isRecord(chunk.error)) {
      const message = typeof chunk.error.message === "string" ? chunk.error.message : "the upstream failed";
      return translator.fail(message, typeof chunk.error.code === "string" ? chunk.error.code : "server_error");
    }
    return translator.chunk(chunk);
  };

  return { events: (text) => mapEventData(text, translate) };
}
