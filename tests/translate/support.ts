/**
 * The official clients, pointed at a fetch that answers with a given body: the SDKs' own parsers
 * (SSE framing, event accumulation, error classes by status) check the translators' wire format.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

function answering(body: string, status: number, contentType: string): typeof fetch {
  return (async () => new Response(body, { status, headers: { "content-type": contentType, "request-id": "req_test" } })) as unknown as typeof fetch;
}

export function anthropicClient(body: string, options: { status?: number; contentType?: string } = {}): Anthropic {
  const fetch = answering(body, options.status ?? 200, options.contentType ?? "text/event-stream");
  return new Anthropic({ apiKey: "test", baseURL: "http://gateway.test", maxRetries: 0, fetch });
}

export function openaiClient(body: string, options: { status?: number; contentType?: string } = {}): OpenAI {
  const fetch = answering(body, options.status ?? 200, options.contentType ?? "text/event-stream");
  return new OpenAI({ apiKey: "test", baseURL: "http://gateway.test/v1", maxRetries: 0, fetch });
}

/** The event names of an SSE text, in order. */
export function eventNames(sse: string): string[] {
  return [...sse.matchAll(/^event: (.+)$/gm)].map((m) => m[1]);
}
