/**
 * The SSE relay's contract with its caller (./sse.ts relaySse, called by ./pipeline.ts): what it
 * is given (timeouts, the stream's API, a translation, the settlement to run when it ends) and
 * what it reports once the stream ended, however it ended.
 */
import type { Usage } from "../credits/cost";
import type { StreamDialect, StreamRewrite } from "./sse-events";

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
  /** A translation of the events for the client (another API's), in the relay's own pull. */
  rewrite?: StreamRewrite;
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
