/**
 * The model endpoints in process, through the same front door the server mounts: bad input on
 * every endpoint (the error shape, never a 500, nothing charged, nothing sent upstream), wrong
 * content types, uploads over the limit, a model narrowed to some endpoints, the developer role,
 * the endpoint label in metrics, and the OpenAPI operations.
 */
import { describe, expect, test } from "bun:test";
import { HELLO, json, mockUpstreams, parseMetrics, routerApp, sample } from "./helpers";

const start = mockUpstreams();

function gateway(extra: Record<string, unknown> = {}, upstreams = [start()]) {
  return routerApp({
    server: { max_body_bytes: 4096 },
    upstreams: upstreams.map((u, i) => ({ name: `u${i}`, base_url: u.url, ...(extra.upstream as object) })),
    models: [
      { id: "m", free: true, targets: upstreams.map((_, i) => ({ upstream: `u${i}`, model: "mock-small" })) },
      { id: "embed-only", free: true, targets: [{ upstream: "u0" }], endpoints: ["embeddings"] },
    ],
    ...(extra.routing ? { routing: extra.routing } : {}),
  });
}

const post = (_path: string, body: RequestInit["body"], headers: Record<string, string> = { "content-type": "application/json" }): RequestInit => ({
  method: "POST",
  headers,
  body,
});

function upload(fields: Array<[string, string | Blob]>): FormData {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value as string);
  return form;
}

const BAD_INPUT: Array<[string, string, RequestInit["body"], Record<string, string>?]> = [
  ["/v1/completions", "not JSON", "{"],
  ["/v1/completions", "no prompt", JSON.stringify({ model: "m" })],
  ["/v1/completions", "max_tokens a string", JSON.stringify({ model: "m", prompt: "x", max_tokens: "5" })],
  ["/v1/embeddings", "no input", JSON.stringify({ model: "m" })],
  ["/v1/embeddings", "an empty input array", JSON.stringify({ model: "m", input: [] })],
  ["/v1/embeddings", "an array body", "[1, 2]"],
  ["/v1/rerank", "no documents", JSON.stringify({ model: "m", query: "q" })],
  ["/rerank", "a query that is not a string", JSON.stringify({ model: "m", query: 5, documents: ["a"] })],
  ["/v1/audio/speech", "no voice", JSON.stringify({ model: "m", input: "hi" })],
  ["/v1/audio/speech", "model null", JSON.stringify({ model: null, input: "hi", voice: "alloy" })],
  ["/v1/audio/transcriptions", "JSON instead of an upload", JSON.stringify({ model: "m" })],
  ["/v1/audio/transcriptions", "an upload without a model", upload([["file", new Blob(["RIFF"])]]), {}],
  [
    "/v1/audio/translations",
    "an empty model",
    upload([
      ["model", ""],
      ["file", new Blob(["RIFF"])],
    ]),
    {},
  ],
  ["/v1/audio/transcriptions", "a multipart type without a boundary", "--x\r\n", { "content-type": "multipart/form-data" }],
  [
    "/v1/embeddings",
    "an upload instead of JSON",
    upload([
      ["model", "m"],
      ["input", "x"],
    ]),
    {},
  ],
];

describe("bad input on every endpoint", () => {
  test.each(BAD_INPUT)("%s: %s -> 400 in OpenAI's shape, nothing sent upstream or charged", async (path, _why, body, headers) => {
    const upstream = start();
    const gw = gateway({}, [upstream]);
    const res = await gw.request(path, post(path, body, headers));
    expect(res.status).toBe(400);
    expect(res.headers.get("x-request-id")).toStartWith("req_");
    const error = (await json(res)).error;
    expect(error.type).toBe("invalid_request_error");
    expect(typeof error.message).toBe("string");
    expect(upstream.requests).toHaveLength(0);
    expect(gw.records.map((r) => [r.status, r.costMicro])).toEqual([[400, 0]]);
  });

  test("odd bodies to every endpoint: a 4xx in the error shape, never a 500", async () => {
    const gw = gateway();
    const paths = [
      "/v1/chat/completions",
      "/v1/completions",
      "/v1/embeddings",
      "/v1/rerank",
      "/rerank",
      "/v1/audio/speech",
      "/v1/audio/transcriptions",
      "/v1/audio/translations",
    ];
    const bodies: Array<[RequestInit["body"], Record<string, string>]> = [
      ["", {}],
      ["null", { "content-type": "application/json" }],
      ['{"model":1}', { "content-type": "application/json" }],
      [
        '{"model":"nope","input":"x","prompt":"x","messages":[{"role":"user","content":"x"}],"query":"q","documents":["d"],"voice":"v"}',
        { "content-type": "application/json" },
      ],
      [new Uint8Array([0, 255, 13, 10, 45, 45]), { "content-type": "multipart/form-data; boundary=x" }],
      ['--x\r\nContent-Disposition: form-data; name="model"\r\n\r\nnope\r\n--x--\r\n', { "content-type": "multipart/form-data; boundary=x" }],
    ];
    for (const path of paths) {
      for (const [body, headers] of bodies) {
        const res = await gw.request(path, { method: "POST", headers, body });
        expect([400, 404]).toContain(res.status);
        expect((await json(res)).error.message.length).toBeGreaterThan(0);
      }
    }
    expect(gw.records.every((r) => r.costMicro === 0 && r.upstream === null)).toBe(true);
  });

  test("the content-type errors say what was expected", async () => {
    const gw = gateway();
    const toUpload = await json(await gw.request("/v1/audio/transcriptions", post("/", JSON.stringify({ model: "m" }))));
    expect(toUpload.error.message).toContain("multipart/form-data");
    const toJson = await json(await gw.request("/v1/embeddings", { method: "POST", body: upload([["model", "m"]]) }));
    expect(toJson.error.message).toContain("JSON body");
  });

  test("an upload over max_body_bytes is a 413, declared or chunked, and nothing reaches the upstream", async () => {
    const upstream = start();
    const gw = gateway({}, [upstream]);
    const big = upload([
      ["file", new Blob([new Uint8Array(8192)])],
      ["model", "m"],
    ]);
    const declared = await gw.request("/v1/audio/transcriptions", { method: "POST", body: big });
    expect(declared.status).toBe(413);
    expect((await json(declared)).error.code).toBe("payload_too_large");
    const request = new Request("http://localhost/v1/audio/transcriptions", { method: "POST", body: big });
    const stream = request.body!;
    const chunked = await gw.request("/v1/audio/transcriptions", {
      method: "POST",
      headers: { "content-type": request.headers.get("content-type")! },
      body: stream,
      duplex: "half",
    } as RequestInit);
    expect(chunked.status).toBe(413);
    expect(upstream.requests).toHaveLength(0);
  });
});

describe("uploads and audio", () => {
  test("an upload that passes max_body_bytes after its model field is cut off with a 413, not charged, the target not blamed", async () => {
    const upstream = start();
    const gw = gateway({}, [upstream]);
    const form = upload([
      ["model", "m"],
      ["file", new Blob([new Uint8Array(8192)])],
    ]);
    const request = new Request("http://localhost/", { method: "POST", body: form });
    const type = request.headers.get("content-type")!;
    const bytes = new Uint8Array(await request.arrayBuffer());
    // In reads of 1 KiB: the model field is found, the upload is under way, then it passes the limit.
    let at = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (at >= bytes.length) return controller.close();
        controller.enqueue(bytes.slice(at, (at += 1024)));
      },
    });
    const res = await gw.request("/v1/audio/transcriptions", { method: "POST", headers: { "content-type": type }, body, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
    expect((await json(res)).error.code).toBe("payload_too_large");
    expect(gw.records.map((r) => [r.status, r.costMicro])).toEqual([[413, 0]]);
    expect(gw.deps.registry.resolve("m")!.targets[0].circuit.consecutiveFailures).toBe(0);
  });

  test("speech is relayed as audio, and an upstream's type that is not audio as octet-stream", async () => {
    const upstream = start({ speechBytes: 1000 });
    const gw = gateway({}, [upstream]);
    const res = await gw.request("/v1/audio/speech", post("/", JSON.stringify({ model: "m", input: "hi", voice: "alloy", response_format: "wav" })));
    expect(res.headers.get("content-type")).toBe("audio/wav");
    expect((await res.arrayBuffer()).byteLength).toBe(1000);
    const { audioType } = await import("../../src/router/answer-type");
    expect(audioType("text/html")).toBe("application/octet-stream");
    expect(audioType("audio/mpeg, text/html")).toBe("application/octet-stream");
    expect(audioType("audio/ogg; codecs=opus")).toBe("audio/ogg; codecs=opus");
  });
});

describe("usage metered per endpoint", () => {
  test("embeddings and rerank are metered on the input tokens reported, prompt_tokens or only total_tokens (vLLM's rerank)", async () => {
    for (const [usage, path, body] of [
      [{ prompt_tokens: 7, total_tokens: 7 }, "/v1/embeddings", { model: "m", input: "x" }],
      [{ total_tokens: 9 }, "/v1/rerank", { model: "m", query: "q", documents: ["a"] }],
    ] as const) {
      const upstream = start({ usage });
      const gw = routerApp({
        upstreams: [{ name: "u", base_url: upstream.url }],
        models: [{ id: "m", targets: [{ upstream: "u" }], price: { prompt: 1000, completion: 5000 } }],
      });
      expect((await gw.request(path, post(path, JSON.stringify(body)))).status).toBe(200);
      const tokens = "prompt_tokens" in usage ? usage.prompt_tokens : usage.total_tokens;
      expect(gw.records.map((r) => [r.promptTokens, r.completionTokens, r.costMicro])).toEqual([[tokens, 0, tokens * 1000]]);
    }
  });
});

describe("one front door", () => {
  test("a chat body over max_body_bytes through app.handle is answered and recorded as the server's route answers it", async () => {
    const gw = gateway();
    const res = await gw.request("/v1/chat/completions", post("/", JSON.stringify({ model: "m", messages: HELLO, pad: "x".repeat(5000) })));
    expect(res.status).toBe(413);
    expect(res.headers.get("x-gateway-overhead-ms")).not.toBeNull();
    expect(gw.records.map((r) => [r.status, r.endpoint])).toEqual([[413, "chat"]]);
  });

  test("a trailing slash reaches the same endpoint", async () => {
    const gw = gateway();
    const res = await gw.request("/v1/embeddings/", post("/", JSON.stringify({ model: "m", input: "x" })));
    expect(res.status).toBe(200);
    expect(gw.records.map((r) => r.endpoint)).toEqual(["embeddings"]);
  });
});

describe("model routes and endpoints", () => {
  test("a model narrowed to embeddings refuses chat with a 400 naming both; /v1/models lists each route's endpoints", async () => {
    const gw = gateway();
    const res = await gw.chat({ model: "embed-only", messages: HELLO });
    expect(res.status).toBe(400);
    expect((await json(res)).error.message).toBe('The model "embed-only" does not serve /v1/chat/completions (the chat endpoint); it serves: embeddings');
    expect((await gw.request("/v1/embeddings", post("/", JSON.stringify({ model: "embed-only", input: "x" })))).status).toBe(200);
    const models = (await json(await gw.request("/v1/models"))).data;
    expect(models.find((m: { id: string }) => m.id === "embed-only").endpoints).toEqual(["embeddings"]);
    expect(models.find((m: { id: string }) => m.id === "m").endpoints).toEqual([
      "chat",
      "completions",
      "embeddings",
      "rerank",
      "transcriptions",
      "translations",
      "speech",
      "messages",
      "responses",
    ]);
  });

  test("the model field of an upload is replaced by the target's name, the file passed through byte for byte", async () => {
    const upstream = start();
    const gw = gateway({}, [upstream]);
    const res = await gw.request("/v1/audio/transcriptions", {
      method: "POST",
      body: upload([
        ["file", new Blob(["RIFF1234"], { type: "audio/wav" })],
        ["model", "m"],
        ["language", "en"],
      ]),
    });
    expect(await json(res)).toEqual({ text: "heard 8 bytes of RIFF" });
    expect(upstream.requests[0].body.fields).toEqual({ model: "mock-small", language: "en" });
  });

  test("an upstream's refusal of an upload is relayed and not charged; the upload is not sent to a second target", async () => {
    const failing = start({ failWith: 500 });
    const other = start();
    const gw = gateway({}, [failing, other]);
    const res = await gw.request("/v1/audio/transcriptions", {
      method: "POST",
      body: upload([
        ["model", "m"],
        ["file", new Blob(["RIFF"])],
      ]),
    });
    expect(res.status).toBe(502);
    expect(failing.requests).toHaveLength(1);
    expect(other.requests).toHaveLength(0);
    expect(gw.records.map((r) => r.costMicro)).toEqual([0]);
  });
});

describe("the developer role", () => {
  const messages = [
    { role: "developer", content: "Answer briefly." },
    { role: "user", content: "hi" },
  ];

  test("is sent as system by default, and as it came to an upstream with developer_role = developer", async () => {
    const upstream = start();
    const plain = gateway({}, [upstream]);
    expect((await plain.chat({ model: "m", messages })).status).toBe(200);
    expect(upstream.requests[0].body.messages[0]).toEqual({ role: "system", content: "Answer briefly." });
    const native = gateway({ upstream: { developer_role: "developer" } }, [upstream]);
    expect((await native.chat({ model: "m", messages })).status).toBe(200);
    expect(upstream.requests[1].body.messages[0]).toEqual({ role: "developer", content: "Answer briefly." });
  });

  test("each target of a failover gets the role its upstream takes", async () => {
    const failing = start({ failWith: 503 });
    const other = start();
    const gw = routerApp({
      routing: { retry_backoff_ms: 0 },
      upstreams: [
        { name: "native", base_url: failing.url, developer_role: "developer" },
        { name: "plain", base_url: other.url },
      ],
      models: [{ id: "m", free: true, targets: [{ upstream: "native" }, { upstream: "plain" }] }],
    });
    expect((await gw.chat({ model: "m", messages })).status).toBe(200);
    expect(failing.requests[0].body.messages[0].role).toBe("developer");
    expect(other.requests[0].body.messages[0].role).toBe("system");
  });
});

describe("metrics and docs", () => {
  test("modelgate_requests_total carries the endpoint", async () => {
    const gw = gateway();
    await gw.request("/v1/embeddings", post("/", JSON.stringify({ model: "m", input: "x" })));
    await gw.request("/v1/completions", post("/", JSON.stringify({ model: "m", prompt: "x" })));
    await gw.chat({ model: "m", messages: HELLO });
    const m = parseMetrics(await (await gw.request("/metrics")).text());
    for (const endpoint of ["embeddings", "completions", "chat"])
      expect(sample(m, "modelgate_requests_total", { model: "m", endpoint, status: "200" })).toBe(1);
  });

  test("the OpenAPI document has every endpoint's operation, each example naming a model that serves it", async () => {
    const gw = gateway();
    const doc = await json(await gw.request("/swagger/json"));
    const operations: Record<string, string> = {
      "/v1/completions": "createCompletion",
      "/v1/embeddings": "createEmbedding",
      "/v1/rerank": "createRerank",
      "/v1/audio/transcriptions": "createTranscription",
      "/v1/audio/translations": "createTranslation",
      "/v1/audio/speech": "createSpeech",
      "/v1/responses": "createResponse",
    };
    for (const [path, id] of Object.entries(operations)) {
      const op = doc.paths[path].post;
      expect(op.operationId).toBe(id);
      const content = op.requestBody.content;
      const example = content["application/json"]?.example ?? { model: content["multipart/form-data"].schema.properties.model.default };
      expect(example.model).toBe("m");
      // The example works as it is: sent to the endpoint, it is answered.
      if (content["application/json"]) expect((await gw.request(path, post(path, JSON.stringify(example)))).status).toBe(200);
    }
  });
});
