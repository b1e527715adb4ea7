/**
 * The adapter seam takes a translating endpoint as it is: a toy API (`{model, text}` in, `{said}`
 * out, errors as `{"problem": ...}`) mounted with createEndpoint over chat completions upstream,
 * as the Messages and Responses endpoints will be. Its answer and stream are translated back, its
 * usage is metered from the chat answer, and its errors come in its own shape.
 */
import { describe, expect, test } from "bun:test";
import { createEndpoint } from "../../src/router/endpoint";
import { chatAdapter, completionPayload } from "../../src/router/adapters/chat";
import { GatewayError } from "../../src/errors";
import type { CallBody, EndpointAdapter } from "../../src/router/adapters/types";
import { mockUpstreams, routerApp } from "./helpers";

const start = mockUpstreams();

const toy: EndpointAdapter = {
  ...chatAdapter,
  paths: ["/v1/toy"],
  keepUsageChunk: true,
  check(body: unknown): asserts body is CallBody {
    const b = body as Record<string, unknown> | null;
    if (typeof b?.model !== "string" || typeof b.text !== "string") throw new GatewayError("invalid_request_error", "model and text, please");
  },
  checkRoute: undefined,
  // The chat body built per target, with the priced completion limit where that target's upstream reads it.
  payload: (body, target, tokenLimit) =>
    completionPayload({ model: "", messages: [{ role: "user", content: body.text }], stream: body.stream === true }, target, tokenLimit),
  transformWhole: (text, body) => JSON.stringify({ said: JSON.parse(text).choices[0].message.content, asked: body.model }),
  rewriteEvents: () => ({ events: (text) => text.toUpperCase() }),
  renderError: (error, headers) => Response.json({ problem: error.message }, { status: error.status, headers }),
};

describe("a translating adapter on the pipeline", () => {
  test("its request is translated per target, its answer and stream back, its usage metered, its errors in its shape", async () => {
    const upstream = start();
    const gw = routerApp({
      upstreams: [{ name: "u", base_url: upstream.url }],
      models: [{ id: "m", targets: [{ upstream: "u", model: "mock-small" }], price: { prompt: 1000, completion: 1000 } }],
    });
    const endpoint = createEndpoint(gw.deps, toy);
    const call = (body: unknown) => endpoint(new Request("http://localhost/v1/toy", { method: "POST", body: JSON.stringify(body) }), null);
    expect(await (await call({ model: "m", text: "hi" })).json()).toEqual({ said: "Hello from the mock upstream.", asked: "m" });
    expect(upstream.requests[0].body).toEqual({ model: "mock-small", messages: [{ role: "user", content: "hi" }], stream: false, max_tokens: 4096 });
    const streamed = await (await call({ model: "m", text: "hi", stream: true })).text();
    expect(streamed).toContain('"CONTENT":"HELLO"');
    // The usage chunk reaches the translator though the toy's client never asked for it.
    expect(streamed).toContain('"USAGE":{"PROMPT_TOKENS"');
    expect(upstream.requests[1].body.stream_options).toEqual({ include_usage: true });
    expect(gw.records.map((r) => [r.endpoint, r.status, r.costMicro > 0])).toEqual([
      ["chat", 200, true],
      ["chat", 200, true],
    ]);
    const refused = await call({ model: "m" });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({ problem: "model and text, please" });
  });
});
