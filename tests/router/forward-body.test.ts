/**
 * What goes upstream as the request body: always the gateway's own parse, re-serialised with the
 * target's model name, never the client's bytes. So an upstream sees exactly the request the
 * gateway routed and priced, whatever its JSON parser does with duplicate keys; also on the
 * attempts that follow a failover.
 */
import { expect, test } from "bun:test";
import { freePort } from "../support/binary";
import { HELLO, json, mockUpstreams, routerApp } from "./helpers";

const mock = mockUpstreams();
const SENT = '{ "messages": [{"role":"user","content":"hello"}],\n  "model": "m", "seed": 12345678901234567890, "temperature": 0.50 }';

function post(gw: ReturnType<typeof routerApp>, text: string): Promise<Response> {
  return gw.request("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: text });
}

test("a body with a duplicate model key goes upstream as the gateway read it: one model, the one it routed", async () => {
  const up = mock();
  const gw = routerApp({
    upstreams: [{ name: "a", base_url: up.url }],
    models: [
      { id: "m", free: true, targets: [{ upstream: "a" }] },
      { id: "pricey", price: { prompt: 1, completion: 1 }, targets: [{ upstream: "a" }] },
    ],
  });
  const twice = '{"model": "pricey", "messages": [{"role":"user","content":"hello"}], "model": "m"}';
  expect((await post(gw, twice)).status).toBe(200);
  expect(up.requests[0].text.match(/"model"/g)).toHaveLength(1);
  expect(up.requests[0].body.model).toBe("m");
});

test("a target with its own model name gets the parsed body with that name", async () => {
  const up = mock();
  const gw = routerApp({ upstreams: [{ name: "a", base_url: up.url }], models: [{ id: "m", free: true, targets: [{ upstream: "a", model: "real" }] }] });
  expect((await post(gw, SENT)).status).toBe(200);
  expect(up.requests[0].text).not.toBe(SENT);
  expect(up.requests[0].body).toMatchObject({ model: "real", messages: HELLO, temperature: 0.5 });
});

test("after a failover from a renamed target, the next target gets its own name, never the client's text", async () => {
  const up = mock();
  const gw = routerApp({
    upstreams: [
      { name: "down", base_url: `http://127.0.0.1:${freePort()}/v1` },
      { name: "b", base_url: up.url },
    ],
    models: [
      {
        id: "m",
        free: true,
        targets: [
          { upstream: "down", model: "real" },
          { upstream: "b", model: "real" },
        ],
      },
    ],
    routing: { retry_backoff_ms: 0 },
  });
  const res = await post(gw, SENT);
  expect(res.status).toBe(200);
  expect((await json(res)).choices[0].message.content).toBe("Hello from the mock upstream.");
  expect(up.requests[0].body.model).toBe("real");
});

test("a streamed request is amended (usage asked for), so it goes as the gateway's parse", async () => {
  const up = mock();
  const gw = routerApp({ upstreams: [{ name: "a", base_url: up.url }], models: [{ id: "m", free: true, targets: [{ upstream: "a" }] }] });
  const streamed = SENT.replace('"model": "m"', '"model": "m", "stream": true');
  const res = await post(gw, streamed);
  expect(res.status).toBe(200);
  await res.text();
  expect(up.requests[0].body).toMatchObject({ model: "m", stream: true, stream_options: { include_usage: true } });
});
