/**
 * A chat.completions stream rewritten, chunk by chunk, as an Anthropic Messages stream.
 *
 *   const s = createMessagesStream({ model, id, stopSequences? })
 *   s.start()                 -> the `message_start` event (sent by chunk() if not yet sent)
 *   s.chunk(parsedChatChunk)  -> the events one chat.completion.chunk gives ("" for none)
 *   s.ping()                  -> a `ping` event, for the pipeline to send during long silences
 *                                (after `message_start`, which it sends first if not yet sent)
 *   s.end({ usage? })         -> the open block's stop, `message_delta` (stop reason, usage), `message_stop`
 *   s.fail(message, type?)    -> an `error` event: the end of a stream that broke
 * Every method returns SSE text (`event: NAME\ndata: JSON\n\n`) ready to write; after end() or
 * fail() every method returns "".
 *
 * A state machine over parsed chunks: it holds the open block's kind and index, the block index
 * of each chat tool call, the finish reason and the usage, never the text. Blocks open and close
 * in order, as Anthropic sends them: reasoning (`thinking`, `thinking_delta`), text
 * (`text_delta`; an OpenAI-style `refusal` too, ending with stop reason `refusal`) and each tool call (`tool_use` with `input: {}`, then `input_json_delta` with
 * the argument fragments as the upstream sent them). Upstreams send a tool call's fragments one
 * call after another; a fragment for a call whose block is closed is still sent at that block's
 * index, which the SDKs accumulate by index.
 * Usage comes last in a chat stream (the chunk with include_usage), so `message_start` reports
 * zero tokens and `message_delta` carries input_tokens and output_tokens, which the SDKs take
 * as the totals.
 */
import { anthropicUsage, stopReason } from "./anthropic-answer";
import { firstChoice, isRecord, matchedStopSequence, readChatUsage, reasoningOf, stringField, type ChatJson, type ChatUsage } from "./chat";
import type { AnthropicErrorType } from "./anthropic-errors";

export interface MessagesStreamOptions {
  /** The model the client named. */
  model: string;
  /** The message id (`msg_...`). */
  id: string;
  /** The request's stop_sequences, to tell stop_sequence from end_turn. */
  stopSequences?: readonly string[];
}

export interface MessagesStream {
  start(): string;
  chunk(chunk: ChatJson): string;
  ping(): string;
  end(options?: { usage?: ChatUsage | null }): string;
  fail(message: string, type?: AnthropicErrorType): string;
}

const PING = 'event: ping\ndata: {"type":"ping"}\n\n';
const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';

type Open = "none" | "text" | "thinking" | "tool";

export function createMessagesStream(options: MessagesStreamOptions): MessagesStream {
  const stopSequences = options.stopSequences ?? [];
  let phase: "new" | "open" | "done" = "new";
  let open: Open = "none";
  let nextIndex = 0;
  /** Block index per chat tool-call index. */
  const toolBlocks: number[] = [];
  let finishReason = "";
  let stopSequence: string | null = null;
  let usage: ChatUsage | null = null;
  let refused = false;

  function start(): string {
    if (phase !== "new") return "";
    phase = "open";
    const message = {
      id: options.id,
      type: "message",
      role: "assistant",
      model: options.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    };
    return `event: message_start\ndata: {"type":"message_start","message":${JSON.stringify(message)}}\n\n`;
  }

  function close(): string {
    if (open === "none") return "";
    open = "none";
    return `event: content_block_stop\ndata: {"type":"content_block_stop","index":${nextIndex - 1}}\n\n`;
  }

  function begin(kind: Open, block: string): string {
    const out = `${close()}event: content_block_start\ndata: {"type":"content_block_start","index":${nextIndex},"content_block":${block}}\n\n`;
    open = kind;
    nextIndex++;
    return out;
  }

  function delta(index: number, body: string): string {
    return `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":${body}}\n\n`;
  }

  function toolEvents(calls: unknown[]): string {
    let out = "";
    for (const call of calls) {
      if (!isRecord(call)) continue;
      const at = typeof call.index === "number" ? call.index : 0;
      const fn = isRecord(call.function) ? call.function : null;
      if (toolBlocks[at] === undefined) {
        const id = stringField(call, "id") || `toolu_${options.id}_${at}`;
        toolBlocks[at] = nextIndex;
        out += begin("tool", `{"type":"tool_use","id":${JSON.stringify(id)},"name":${JSON.stringify(stringField(fn, "name"))},"input":{}}`);
      }
      const args = stringField(fn, "arguments");
      if (args) out += delta(toolBlocks[at], `{"type":"input_json_delta","partial_json":${JSON.stringify(args)}}`);
    }
    return out;
  }

  function chunk(chunk: ChatJson): string {
    if (phase === "done") return "";
    let out = start();
    const reported = readChatUsage(chunk);
    if (reported) usage = reported;
    const choice = firstChoice(chunk);
    if (!choice) return out;
    const d = isRecord(choice.delta) ? choice.delta : null;
    const reasoning = reasoningOf(d);
    if (reasoning) {
      if (open !== "thinking") out += begin("thinking", '{"type":"thinking","thinking":"","signature":""}');
      out += delta(nextIndex - 1, `{"type":"thinking_delta","thinking":${JSON.stringify(reasoning)}}`);
    }
    const refusal = stringField(d, "refusal");
    if (refusal) refused = true;
    const text = stringField(d, "content") + refusal;
    if (text) {
      if (open !== "text") out += begin("text", '{"type":"text","text":""}');
      out += delta(nextIndex - 1, `{"type":"text_delta","text":${JSON.stringify(text)}}`);
    }
    if (Array.isArray(d?.tool_calls)) out += toolEvents(d.tool_calls);
    const finish = stringField(choice, "finish_reason");
    if (finish) {
      finishReason = finish;
      stopSequence = matchedStopSequence(choice, stopSequences);
    }
    return out;
  }

  function end(endOptions: { usage?: ChatUsage | null } = {}): string {
    if (phase === "done") return "";
    const out = start() + close();
    phase = "done";
    const stop = { stop_reason: refused ? "refusal" : stopReason(finishReason, stopSequence), stop_sequence: stopSequence };
    const totals = anthropicUsage(endOptions.usage ?? usage);
    return `${out}event: message_delta\ndata: {"type":"message_delta","delta":${JSON.stringify(stop)},"usage":${JSON.stringify(totals)}}\n\n${MESSAGE_STOP}`;
  }

  function fail(message: string, type: AnthropicErrorType = "api_error"): string {
    if (phase === "done") return "";
    const out = start();
    phase = "done";
    return `${out}event: error\ndata: {"type":"error","error":{"type":"${type}","message":${JSON.stringify(message)}}}\n\n`;
  }

  function ping(): string {
    return phase === "done" ? "" : start() + PING;
  }

  return { start, chunk, ping, end, fail };
}
