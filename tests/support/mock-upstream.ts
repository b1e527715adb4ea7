/**
 * The only stand-in in the test suite: a small OpenAI-compatible model server speaking the real
 * wire format (GET /v1/models, POST /v1/chat/completions as JSON or SSE with optional usage chunk,
 * the other model endpoints of ./mock-endpoints.ts, /v1/responses of ./mock-responses.ts, and Anthropic's /v1/messages of ./mock-anthropic.ts).
 * Behaviour can be switched per instance to fail, stall or break streams, and it records requests.
 * Also used by bench/ (run as a script: `bun tests/support/mock-upstream.ts PORT`).
 */
import { chatToolAnswer, responsesAnswer, type ResponsesBehaviour } from "./mock-responses";
import { anthropicAnswer, ANTHROPIC_PATHS } from "./mock-anthropic";
import { completionAnswer, embeddingAnswer, MOCK_PATHS, readUploadSeen, rerankAnswer, speechAnswer, transcriptionAnswer } from "./mock-endpoints";

export interface MockBehaviour extends ResponsesBehaviour {
  /** Answer every chat request with this status and an OpenAI error body. */
  failWith?: number;
  /** Wait before sending headers (ms). */
  delayMs?: number;
  /** Wait for this before sending headers (the test decides the moment). */
  holdUntil?: Promise<unknown>;
  /** Send this many content chunks, then break the connection. */
  breakAfterChunks?: number;
  /** Stall (send nothing more) after this many chunks. */
  stallAfterChunks?: number;
  /** Ends the stall of stallAfterChunks when it settles (the test decides); unset, it lasts for ever. */
  stallUntil?: Promise<unknown>;
  /** Words of the streamed answer. */
  words?: string[];
  /** Delay between stream chunks (ms). */
  chunkDelayMs?: number;
  models?: string[];
  /** Report this as `usage` (JSON and stream) instead of the counts of the answer. */
  usage?: Record<string, unknown>;
  /** Report no usage at all, even when asked for it (as some older servers do). */
  noUsage?: boolean;
  /** After this many content chunks, send one event whose data is not JSON (then go on). */
  brokenEventAfterChunks?: number;
  /**
   * Generate up to the request's max_tokens, or max_completion_tokens, and this many when it sets
   * neither (a server's own default, as vLLM's is the context length): reported as the usage.
   */
  ownDefaultMaxTokens?: number;
  /** Bytes of audio /v1/audio/speech streams back. */
  speechBytes?: number;
  /** The key the Messages paths demand in x-api-key, with an anthropic-version (./mock-anthropic.ts); unset, none. */
  anthropicKey?: string;
  /** Answers a chat request instead of the words when it returns a Response (a scripted conversation: ./agent-script.ts). */
  answer?: (body: Record<string, any>) => Response | undefined;
}

export interface MockUpstream {
  url: string;
  port: number;
  behaviour: MockBehaviour;
  /** The first RECORDED_LIMIT requests (a long benchmark run must not grow without bound); an upload's body is what the mock read of it. */
  requests: Array<{ path: string; body: any; text: string; headers: Record<string, string> }>;
  /** Streams the client (the gateway) cancelled before they ended. */
  cancelledStreams: number;
  chatCount(): number;
  stop(): void;
}

const RECORDED_LIMIT = 10_000;
const DEFAULT_WORDS = ["Hello", " from", " the", " mock", " upstream", "."];

export function startMockUpstream(behaviour: MockBehaviour = {}, port = 0): MockUpstream {
  const requests: MockUpstream["requests"] = [];
  let chats = 0;
  const server = Bun.serve({
    port,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === "/v1/models" && request.method === "GET") {
        const ids = behaviour.models ?? ["mock-small", "mock-large"];
        return Response.json({ object: "list", data: ids.map((id) => ({ id, object: "model", created: 0, owned_by: "mock" })) });
      }
      if ((MOCK_PATHS.includes(url.pathname) || url.pathname === "/v1/responses") && request.method === "POST") return otherEndpoint(url.pathname, request);
      if (ANTHROPIC_PATHS.includes(url.pathname) && request.method === "POST")
        return anthropicAnswer(
          url.pathname,
          request,
          behaviour,
          (body, text) => requests.length < RECORDED_LIMIT && requests.push({ path: url.pathname, body, text, headers: Object.fromEntries(request.headers) }),
        );
      if (url.pathname !== "/v1/chat/completions" || request.method !== "POST") {
        return Response.json({ error: { message: "not found", type: "invalid_request_error", param: null, code: null } }, { status: 404 });
      }
      const text = await request.text();
      const body = JSON.parse(text) as Record<string, any>;
      chats += 1;
      if (requests.length < RECORDED_LIMIT) requests.push({ path: url.pathname, body, text, headers: Object.fromEntries(request.headers) });
      if (behaviour.delayMs) await Bun.sleep(behaviour.delayMs);
      if (behaviour.holdUntil) await behaviour.holdUntil;
      if (behaviour.failWith) {
        return Response.json(
          { error: { message: `mock failure ${behaviour.failWith}`, type: "server_error", param: null, code: null } },
          { status: behaviour.failWith },
        );
      }
      const words = behaviour.words ?? DEFAULT_WORDS;
      const toolAnswer = chatToolAnswer(body, { ...behaviour, words });
      if (toolAnswer) return toolAnswer;
      const scripted = behaviour.answer?.(body);
      if (scripted) return scripted;
      const promptTokens = JSON.stringify(body.messages ?? []).length >> 2;
      const generated =
        behaviour.ownDefaultMaxTokens === undefined ? words.length : (body.max_tokens ?? body.max_completion_tokens ?? behaviour.ownDefaultMaxTokens);
      const usage = behaviour.usage ?? { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated };
      const id = "chatcmpl-mock";
      const created = Math.floor(Date.now() / 1000);
      if (!body.stream) {
        return Response.json({
          id,
          object: "chat.completion",
          created,
          model: body.model,
          choices: [{ index: 0, message: { role: "assistant", content: words.join("") }, finish_reason: "stop" }],
          ...(behaviour.noUsage ? {} : { usage }),
        });
      }
      return new Response(
        sseStream(body, words, usage, behaviour, { id, created }, () => (mock.cancelledStreams += 1)),
        {
          headers: { "content-type": "text/event-stream", "cache-control": "no-cache" },
        },
      );
    },
  });
  async function otherEndpoint(path: string, request: Request): Promise<Response> {
    const headers = Object.fromEntries(request.headers);
    const upload = path.startsWith("/v1/audio/") && path !== "/v1/audio/speech";
    const seen = upload ? await readUploadSeen(request) : null;
    const text = seen ? "" : await request.text();
    const body = seen ?? (JSON.parse(text) as Record<string, any>);
    if (requests.length < RECORDED_LIMIT) requests.push({ path, body, text, headers });
    if (behaviour.delayMs) await Bun.sleep(behaviour.delayMs);
    if (behaviour.failWith) {
      return Response.json(
        { error: { message: `mock failure ${behaviour.failWith}`, type: "server_error", param: null, code: null } },
        { status: behaviour.failWith },
      );
    }
    const options = { words: behaviour.words ?? DEFAULT_WORDS, usage: behaviour.usage, noUsage: behaviour.noUsage, speechBytes: behaviour.speechBytes };
    if (seen) return transcriptionAnswer(seen, path.endsWith("translations"));
    if (path === "/v1/responses") return responsesAnswer(body, { ...behaviour, words: options.words });
    if (path === "/v1/completions") return completionAnswer(body, options);
    if (path === "/v1/embeddings") return embeddingAnswer(body, options);
    if (path === "/v1/audio/speech") return speechAnswer(body, options);
    return rerankAnswer(body, options);
  }
  const mock: MockUpstream = {
    url: `http://127.0.0.1:${server.port}/v1`,
    port: server.port!,
    behaviour,
    requests,
    cancelledStreams: 0,
    chatCount: () => chats,
    stop: () => server.stop(true),
  };
  return mock;
}

function sseStream(
  body: Record<string, any>,
  words: string[],
  usage: Record<string, unknown>,
  behaviour: MockBehaviour,
  meta: { id: string; created: number },
  onCancel: () => void,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const includeUsage = body.stream_options?.include_usage === true && !behaviour.noUsage;
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
    encoder.encode(
      `data: ${JSON.stringify({ id: meta.id, object: "chat.completion.chunk", created: meta.created, model: body.model, choices, ...extra })}\n\n`,
    );
  let sent = 0;
  let brokenSent = false;
  return new ReadableStream({
    async pull(controller) {
      // The delay comes first so that chunks sent before a break have left the socket.
      if (behaviour.chunkDelayMs && sent > 0) await Bun.sleep(behaviour.chunkDelayMs);
      if (behaviour.breakAfterChunks !== undefined && sent === behaviour.breakAfterChunks) {
        controller.error(new Error("mock upstream broke the stream"));
        return;
      }
      if (behaviour.stallAfterChunks !== undefined && sent === behaviour.stallAfterChunks) {
        await (behaviour.stallUntil ?? new Promise(() => {}));
      }
      if (behaviour.brokenEventAfterChunks === sent && !brokenSent) {
        brokenSent = true;
        controller.enqueue(encoder.encode("data: {not json<b>\n\n"));
        return;
      }
      if (sent < words.length) {
        const delta = sent === 0 ? { role: "assistant", content: words[0] } : { content: words[sent] };
        controller.enqueue(chunk([{ index: 0, delta, finish_reason: null }], includeUsage ? { usage: null } : {}));
      } else if (sent === words.length) {
        controller.enqueue(chunk([{ index: 0, delta: {}, finish_reason: "stop" }], includeUsage ? { usage: null } : {}));
      } else {
        if (includeUsage) controller.enqueue(chunk([], { usage }));
        controller.enqueue(encoder.encode("data: [DONE]\n\n"));
        controller.close();
      }
      sent += 1;
    },
    cancel: onCancel,
  });
}

if (import.meta.main) {
  const mock = startMockUpstream({}, Number(process.argv[2] ?? 0));
  console.log(mock.url);
}
