/**
 * A chat completions stream, as the relay (../sse.ts) hands it on, rewritten as a Responses
 * stream by the translator's state machine (src/translate/responses-stream.ts): response.created
 * and response.in_progress with the first chunk's events (one write, so the first text is not
 * behind a write of its own), each chunk's events as it comes, then response.completed at
 * the chat stream's `[DONE]`. An error event (the upstream's own, or the relay's ending of a stream
 * that broke) becomes response.failed, as does a stream that ends without `[DONE]`.
 */
import { createResponsesStream } from "../../translate/responses-stream";
import { isRecord } from "../../translate/chat";
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

const encoder = new TextEncoder();

export function translatedStream(stream: ReadableStream<Uint8Array>, options: TranslatedStreamOptions): ReadableStream<Uint8Array> {
  const translator = createResponsesStream({ model: options.model, id: options.id, echo: options.echo });
  const decoder = new TextDecoder();
  let pending = "";
  let ended = false;

  /** The Responses events for one chat event's text. */
  const translate = (event: string): string => {
    let data = "";
    for (const line of event.split("\n")) if (line.startsWith("data:")) data += line.charCodeAt(5) === 32 ? line.slice(6) : line.slice(5);
    if (data === "") return "";
    if (data === "[DONE]") {
      ended = true;
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
      ended = true;
      const message = typeof chunk.error.message === "string" ? chunk.error.message : "the upstream failed";
      return translator.fail(message, typeof chunk.error.code === "string" ? chunk.error.code : "server_error");
    }
    return translator.chunk(chunk);
  };

  const events = (text: string): string => {
    pending += text;
    let out = "";
    let start = 0;
    for (let end = pending.indexOf("\n\n"); end !== -1; end = pending.indexOf("\n\n", start)) {
      out += translate(pending.slice(start, end));
      start = end + 2;
    }
    pending = start === 0 ? pending : pending.slice(start);
    return out;
  };

  // Pulled straight from the relay (no TransformStream: each of its hops is a turn of the event
  // loop before the first text reaches the client).
  const reader = stream.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) {
          let out = events(`${decoder.decode()}\n\n`);
          if (!ended) out += translator.fail("the upstream ended its stream before the answer was complete");
          if (out !== "") controller.enqueue(encoder.encode(out));
          controller.close();
          return;
        }
        const out = events(decoder.decode(value, { stream: true }));
        if (out !== "") {
          controller.enqueue(encoder.encode(out));
          return;
        }
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
