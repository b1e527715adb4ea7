/**
 * The mock upstream's endpoints beside chat, in the wire formats real servers speak: OpenAI's
 * completions (JSON and SSE, with the usage chunk when asked for), embeddings (float arrays, or
 * base64 when asked, `dimensions` honoured), audio transcriptions and translations (multipart in,
 * JSON or text out), speech (audio bytes streamed back), and llama.cpp's rerank.
 */

export interface EndpointAnswerOptions {
  words: string[];
  usage?: Record<string, unknown>;
  noUsage?: boolean;
  /** Bytes of audio /audio/speech streams back, in chunks of 16 KiB. */
  speechBytes?: number;
}

/** What an upload to the transcription endpoints held, as the mock read it. */
export interface UploadSeen {
  fields: Record<string, string>;
  fileName: string | null;
  fileBytes: number;
  fileHead: string;
}

export const MOCK_PATHS = [
  "/v1/completions",
  "/v1/embeddings",
  "/v1/rerank",
  "/rerank",
  "/v1/audio/transcriptions",
  "/v1/audio/translations",
  "/v1/audio/speech",
];

export async function readUploadSeen(request: Request): Promise<UploadSeen> {
  const form = await request.formData();
  const fields: Record<string, string> = {};
  let file: File | null = null;
  for (const [name, value] of form) {
    if (typeof value === "string") fields[name] = value;
    else file = value as File;
  }
  const bytes = file ? new Uint8Array(await file.arrayBuffer()) : new Uint8Array();
  return { fields, fileName: file?.name ?? null, fileBytes: bytes.byteLength, fileHead: Buffer.from(bytes.subarray(0, 4)).toString("latin1") };
}

function tokens(value: unknown): number {
  return Math.max(1, JSON.stringify(value ?? "").length >> 2);
}

export function completionAnswer(body: Record<string, any>, options: EndpointAnswerOptions): Response {
  const text = options.words.join("") + (typeof body.suffix === "string" ? `[suffix:${body.suffix}]` : "");
  const promptTokens = tokens(body.prompt);
  const usage = options.usage ?? { prompt_tokens: promptTokens, completion_tokens: options.words.length, total_tokens: promptTokens + options.words.length };
  const base = { id: "cmpl-mock", object: "text_completion", created: Math.floor(Date.now() / 1000), model: body.model };
  if (!body.stream) {
    return Response.json({ ...base, choices: [{ index: 0, text, logprobs: null, finish_reason: "stop" }], ...(options.noUsage ? {} : { usage }) });
  }
  const includeUsage = body.stream_options?.include_usage === true && !options.noUsage;
  const events: Array<Record<string, unknown>> = options.words.map((word) => ({
    ...base,
    choices: [{ index: 0, text: word, logprobs: null, finish_reason: null }],
  }));
  events.push({ ...base, choices: [{ index: 0, text: "", logprobs: null, finish_reason: "stop" }] });
  if (includeUsage) events.push({ ...base, choices: [], usage });
  const sse = `${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join("")}data: [DONE]\n\n`;
  return new Response(sse, { headers: { "content-type": "text/event-stream" } });
}

export function embeddingAnswer(body: Record<string, any>, options: EndpointAnswerOptions): Response {
  if (body.encoding_format === null) {
    // vLLM's answer to a null it does not take.
    return Response.json(
      { error: { message: "encoding_format: Input should be 'float' or 'base64'", type: "BadRequestError", param: null, code: 400 } },
      { status: 400 },
    );
  }
  const inputs: unknown[] = Array.isArray(body.input) && typeof body.input[0] !== "number" ? body.input : [body.input];
  const dims = typeof body.dimensions === "number" ? body.dimensions : 8;
  const data = inputs.map((input, index) => {
    const vector = Array.from({ length: dims }, (_, i) => ((tokens(input) + i) % 7) / 7);
    const embedding = body.encoding_format === "base64" ? Buffer.from(new Float32Array(vector).buffer).toString("base64") : vector;
    return { object: "embedding", index, embedding };
  });
  const promptTokens = inputs.reduce<number>((sum, input) => sum + tokens(input), 0);
  return Response.json({
    object: "list",
    data,
    model: body.model,
    ...(options.noUsage ? {} : { usage: options.usage ?? { prompt_tokens: promptTokens, total_tokens: promptTokens } }),
  });
}

/** llama.cpp's /rerank answer: results by index with relevance_score, usage with prompt_tokens. */
export function rerankAnswer(body: Record<string, any>, options: EndpointAnswerOptions): Response {
  const documents: unknown[] = Array.isArray(body.documents) ? body.documents : [];
  const results = documents.map((doc, index) => ({ index, relevance_score: tokens(doc) / 100 })).sort((a, b) => b.relevance_score - a.relevance_score);
  const top = typeof body.top_n === "number" ? results.slice(0, body.top_n) : results;
  const promptTokens = tokens(body.query) + documents.reduce<number>((sum, d) => sum + tokens(d), 0);
  return Response.json({
    model: body.model,
    object: "list",
    ...(options.noUsage ? {} : { usage: options.usage ?? { prompt_tokens: promptTokens, total_tokens: promptTokens } }),
    results: top,
  });
}

export function transcriptionAnswer(seen: UploadSeen, translate: boolean): Response {
  const text = `${translate ? "translated" : "heard"} ${seen.fileBytes} bytes of ${seen.fileHead}`;
  const format = seen.fields.response_format ?? "json";
  if (format === "text") return new Response(text, { headers: { "content-type": "text/plain; charset=utf-8" } });
  if (format === "verbose_json") return Response.json({ task: translate ? "translate" : "transcribe", language: "english", duration: 1, text, segments: [] });
  return Response.json({ text });
}

export function speechAnswer(body: Record<string, any>, options: EndpointAnswerOptions): Response {
  let left = options.speechBytes ?? 48_000;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (left <= 0) return controller.close();
      const size = Math.min(left, 16_384);
      left -= size;
      controller.enqueue(new Uint8Array(size).fill(0x49));
    },
  });
  const type = body.response_format === "wav" ? "audio/wav" : "audio/mpeg";
  return new Response(stream, { headers: { "content-type": type } });
}
