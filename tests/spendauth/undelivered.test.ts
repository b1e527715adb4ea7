/**
 * A SpendAuth payment is claimed only for an answer the client gets: an upstream whose 200 turns
 * out to be unrelayable (a body that breaks off, an event stream to a request that did not ask to
 * stream) is a 502, queues no settlement, and gives the nonce back, so the same authorization is
 * served once the upstream answers properly.
 */
import { afterEach, expect, test } from "bun:test";
import { listSettlements } from "../../src/spendauth/settlements";
import { answer, cleanUp, upstream, type ServerRequest } from "../support/raw-upstream";
import { BASE_CONFIG, signedHeader, spendAuthApp } from "./helpers";

afterEach(cleanUp);

const BODY = { model: "paid", messages: [{ role: "user", content: "hi" }], max_tokens: 100 };
const COMPLETION = JSON.stringify({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 0,
  model: "m",
  choices: [{ index: 0, message: { role: "assistant", content: "hello" }, finish_reason: "stop" }],
  usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
});

type Spoiler = (req: ServerRequest) => Promise<void>;

const SPOILERS: Record<string, Spoiler> = {
  "a body that breaks off after its headers": async (req) => {
    const whole = answer(COMPLETION);
    await req.conn.write(whole.slice(0, whole.length - 20));
    await req.conn.end();
  },
  "an event stream to a request that did not ask to stream": async (req) => {
    const events = `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "hi" } }] })}\n\ndata: [DONE]\n\n`;
    await req.conn.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: ${events.length}\r\n\r\n${events}`);
  },
};

for (const [name, spoil] of Object.entries(SPOILERS)) {
  test(`${name}: a 502, nothing claimed, and the same authorization is served afterwards`, async () => {
    const server = upstream(async (req) => {
      if (req.index === 0) await spoil(req);
      else await req.conn.write(answer(COMPLETION));
    });
    const config = {
      ...BASE_CONFIG,
      upstreams: [{ name: "mock", base_url: `http://127.0.0.1:${server.port}/v1` }],
      routing: { max_attempts: 1, cooldown_failures: 1000 },
    };
    const app = spendAuthApp(config);
    const paid = await signedHeader({ nonce: 21n });
    const spoilt = await app.chat(BODY, { "x-payment-signature": paid });
    expect(spoilt.status).toBe(502);
    expect(await listSettlements(app.deps.db)).toEqual([]);
    const served = await app.chat(BODY, { "x-payment-signature": paid });
    expect(served.status).toBe(200);
    expect((await listSettlements(app.deps.db)).map((row) => row.nonce)).toEqual(["21"]);
  });
}
