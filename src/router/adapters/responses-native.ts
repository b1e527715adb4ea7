/**
 * /v1/responses passed through to an upstream that serves it (`native = ["responses"]`): the
 * request as the client sent it, naming the target's model, with a priced completion's limit in
 * `max_output_tokens` and a stored conversation (previous_response_id) written out as input
 * items; the usage read from Responses' `usage.input_tokens` / `output_tokens` (the JSON, and the
 * stream's response.completed event); and a stream that breaks ended with `response.failed`.
 * The answer reaches the client as the upstream gave it; nativeEvents only watches it, for the
 * Response object to store and the id the failure event names.
 */
import { readUsage, usageFromJson, type Usage } from "../../credits/cost";
import { parseData, type StreamDialect, type StreamRewrite } from "../sse-events";
import type { CallBody, NativeForm } from "./types";
import type { Target } from "../registry";

/** A Responses `usage` object as the gateway counts tokens; null unless both counts are whole numbers of at least 0. */
function readResponsesUsage(raw: unknown): Usage | null {
  if (typeof raw !== "object" || raw === null) return null;
  const { input_tokens, output_tokens } = raw as Record<string, unknown>;
  return readUsage({ prompt_tokens: input_tokens, completion_tokens: output_tokens });
}

/** This request's `input` as items: a string is one user message. */
export function inputItems(input: unknown): unknown[] {
  if (typeof input === "string") return [{ type: "message", role: "user", content: input }];
  return Array.isArray(input) ? input : [];
}

/** The failure event of a stream the gateway ends; its empty id becomes the response's once nativeEvents has seen it. */
const FAILED_ID = '"id":""';

function failureEvent(message: string): string {
  const response = { id: "", object: "response", status: "failed", error: { code: "server_error", message }, output: [], usage: null };
  return `event: response.failed\ndata: ${JSON.stringify({ type: "response.failed", sequence_number: 0, response })}\n\n`;
}

const DIALECT: StreamDialect = {
  finished: /"type"\s*:\s*"response\.(?:completed|incomplete|failed)"/,
  usage: (data) => readResponsesUsage((data.response as { usage?: unknown } | undefined)?.usage),
  failure: failureEvent,
};

/** The native form; `prior(body)` is the stored conversation the request continues (none: empty). */
export function nativeResponses(prior: (body: CallBody) => readonly unknown[]): NativeForm {
  return {
    upstreamPath: "responses",
    payload(body: CallBody, target: Target, tokenLimit: number | null): Record<string, unknown> {
      // A copy: the client's body keeps its model, which the answer's translation (on another target) names.
      const sent: Record<string, unknown> = { ...body, model: target.model };
      if (tokenLimit !== null) sent.max_output_tokens = tokenLimit;
      const before = prior(body);
      if (before.length > 0) {
        // The gateway keeps the conversation, so any target can continue it: the upstream gets it whole.
        sent.input = [...before, ...inputItems(body.input)];
        delete sent.previous_response_id;
      }
      return sent;
    },
    usage: (text) => usageFromJson(text, readResponsesUsage),
    stream: DIALECT,
  };
}

/**
 * The watcher of a native stream's events, as the relay sends them (RelayOptions.rewrite): they
 * pass unchanged but for the id in the gateway's own failure event; `onResponse` gets the Response
 * object of response.completed (or .incomplete).
 */
export function nativeEvents(onResponse: ((response: Record<string, unknown>) => void) | null): StreamRewrite {
  let id = "";
  const events = (text: string): string => {
    if (id === "" && text.includes("response.created")) id = /"id"\s*:\s*"([^"]*)"/.exec(text)?.[1] ?? "";
    if (onResponse !== null && (text.includes('"response.completed"') || text.includes('"response.incomplete"'))) {
      const response = finalResponse(text);
      if (response !== null) onResponse(response);
    }
    return id !== "" && text.startsWith("event: response.failed") && text.includes(FAILED_ID) ? text.replace(FAILED_ID, `"id":${JSON.stringify(id)}`) : text;
  };
  return { events };
}

/** The Response object of the response.completed or .incomplete event among `text`'s events, or null. */
function finalResponse(text: string): Record<string, unknown> | null {
  for (const event of text.split("\n\n")) {
    if (!/"response\.(?:completed|incomplete)"/.test(event)) continue;
    const parsed = parseData(event);
    if ((parsed?.type === "response.completed" || parsed?.type === "response.incomplete") && typeof parsed.response === "object" && parsed.response !== null) {
      return parsed.response as Record<string, unknown>;
    }
  }
  return null;
}
