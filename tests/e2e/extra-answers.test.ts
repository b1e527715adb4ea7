/**
 * The compiled binary over loopback, two clients with their own keys on one priced model, in front
 * of an upstream that writes an extra answer nobody asked for behind each of its answers: through
 * the official openai SDK, every client reads its own answer (or, where the gateway cannot tell
 * which of two answers is the request's, a 502), and every request is metered on its own answer's
 * usage (the request log's tokens and cost), never on the other client's nor the extra one's.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import OpenAI, { APIError } from "openai";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { cleanUp, upstream, type Upstream } from "../support/raw-upstream";

/** Completion tokens the upstream reports for each client's answers, and for the answer nobody asked for. */
const USAGE = { alice: 11, bob: 22, nobody: 999 } as const;

let raw: Upstream;
let gw: RunningGateway;

function completion(content: string, completionTokens: number): string {
  const body = JSON.stringify({
    id: "chatcmpl-raw",
    object: "chat.completion",
    created: 1,
    model: "raw-model",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { prompt_tokens: 5, completion_tokens: completionTokens, total_tokens: 5 + completionTokens },
  });
  return `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

beforeAll(async () => {
  raw = upstream(async (req) => {
    const prompt = (JSON.parse(req.body.toString()) as { messages: Array<{ content: string }> }).messages[0].content;
    const who = prompt.startsWith("alice") ? "alice" : "bob";
    req.conn.socket.setNoDelay(true); // as uvicorn, Go and Node servers do: each write goes out at once
    await req.conn.write(completion(`answer to ${prompt}`, USAGE[who]));
    // A second write: an upstream that answers one request twice.
    await req.conn.write(completion("an answer nobody asked for", USAGE.nobody));
  });
  gw = await startGateway(`
[limits]
api_key = { per_minute = 100000 }

[[upstreams]]
name = "raw"
base_url = "http://127.0.0.1:${raw.port}/v1"

[[models]]
id = "paid"
targets = [{ upstream = "raw", model = "raw-model" }]
price = { prompt = 1000, completion = 1000 }
`);
});

afterAll(async () => {
  await gw?.stop();
  cleanUp();
});

test("two clients, an upstream that answers twice: each client gets its own answers, metered on its own usage", async () => {
  const clients = await Promise.all(
    (["alice", "bob"] as const).map(async (who) => ({
      who,
      sdk: new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: (await createUserKey(gw, { credits: "1000" })).key, maxRetries: 0 }),
    })),
  );
  const seen: Array<{ who: "alice" | "bob"; requestId: string; status: number }> = [];
  // Four requests of each client in flight at a time, 25 after one another each.
  await Promise.all(
    clients.flatMap(({ who, sdk }) =>
      [0, 1, 2, 3].map(async (lane) => {
        for (let i = 0; i < 25; i++) {
          const prompt = `${who} ${lane}.${i}`;
          try {
            const { data, response } = await sdk.chat.completions.create({ model: "paid", messages: [{ role: "user", content: prompt }] }).withResponse();
            expect(data.choices[0].message.content).toBe(`answer to ${prompt}`);
            expect(data.usage?.completion_tokens).toBe(USAGE[who]);
            seen.push({ who, requestId: response.headers.get("x-request-id")!, status: 200 });
          } catch (err) {
            if (!(err instanceof APIError) || err.status !== 502) throw err;
            expect(err.message).toContain("more than one answer to one request");
            seen.push({ who, requestId: err.headers?.get("x-request-id") ?? "", status: 502 });
          }
        }
      }),
    ),
  );
  expect(seen).toHaveLength(200);
  expect(seen.filter((s) => s.status === 200).length).toBeGreaterThan(190);
  // Request lines are written in batches, shortly after the request.
  const lines = async (): Promise<Map<string, { completion_tokens: number; cost_micro: number; status: number }>> => {
    for (let i = 0; i < 100; i++) {
      const logged = new Map(
        gw
          .output()
          .split("\n")
          .filter((l) => l.includes('"msg":"request"'))
          .map((l) => JSON.parse(l))
          .map((l) => [l.request_id, l]),
      );
      if (seen.every((s) => logged.has(s.requestId))) return logged;
      await Bun.sleep(20);
    }
    throw new Error("request lines missing");
  };
  const logged = await lines();
  for (const { who, requestId, status } of seen) {
    const metered = status === 200 ? { completion_tokens: USAGE[who], cost_micro: (5 + USAGE[who]) * 1000 } : { completion_tokens: 0, cost_micro: 0 };
    expect(logged.get(requestId)).toMatchObject({ status, ...metered });
  }
}, 60_000);
