/**
 * A priced request's completion limit: its reservation assumes the largest limit it sets, else
 * routing.default_max_tokens. The upstream is sent one limit, in the one field it reads
 * (`token_limit_field`): the client's own (moved there if it used the other field), else the
 * reserved one. Regression: nothing was sent, the upstream generated up to
 * its own default (vLLM's is the context length), and a burst of such requests overdrew far past
 * the documented one reservation. Also: `n` and `max_completion_tokens`, which the reservation
 * counts, must be integers (regression: `"n": "8"` was reserved as one choice and answered as eight),
 * and so must llama.cpp's n_predict, which it reads before max_tokens (regression: `n_predict:
 * 100000` beside `max_tokens: 10` was reserved for 10).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { getBalance } from "../../src/credits/ledger";
import { buildAuthApp, HELLO, leastToServe, PAID_PRICE, payingUser, type AuthTestApp } from "../auth/support";
import { MIN_COMPLETION_TOKENS } from "../../src/credits/reservation";
import { buildTestApp } from "../support/app";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

let t: AuthTestApp | null = null;
const mocks: MockUpstream[] = [];
afterEach(() => {
  t?.close();
  t = null;
  for (const m of mocks.splice(0)) m.stop();
});

const ASK = { messages: [{ role: "user", content: "Hello" }] };

function appOver(extra: { token_limit_field?: string } = {}, failFirst = false) {
  const first = startMockUpstream(failFirst ? { failWith: 500 } : {});
  const second = startMockUpstream();
  mocks.push(first, second);
  const app = buildTestApp({
    upstreams: [
      { name: "a", base_url: first.url, ...extra },
      { name: "b", base_url: second.url, token_limit_field: "max_completion_tokens" },
    ],
    models: [
      { id: "paid", targets: [{ upstream: "a" }, { upstream: "b" }], price: { prompt: 1, completion: 2 } },
      { id: "prompt-only", targets: [{ upstream: "a" }], price: { prompt: 1, completion: 0 } },
      { id: "free", targets: [{ upstream: "a" }], free: true },
    ],
    routing: { default_max_tokens: 300 },
  });
  return { app, first, second };
}

const sentLimits = (mock: MockUpstream) => mock.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens]);

describe("the completion limit sent upstream", () => {
  test("a paid request's limit goes in the one field its upstream reads: the client's own, moved there if it set the other, else the limit its reservation assumed (regression: both fields went up, which OpenAI refuses)", async () => {
    const { app, first } = appOver();
    const cases = [
      {},
      { max_tokens: 7 },
      { max_completion_tokens: 9 },
      { n_predict: 11 },
      { max_tokens: 5, n_predict: 50 },
      { max_tokens: null, max_completion_tokens: null },
      { max_tokens: 5, max_completion_tokens: 6 },
    ];
    for (const extra of cases) expect((await app.chat({ model: "paid", ...ASK, ...extra })).status).toBe(200);
    // The last set both: passed on as it came, the client's own business.
    expect(sentLimits(first)).toEqual([
      [300, undefined],
      [7, undefined],
      [9, undefined],
      [11, undefined],
      [5, undefined],
      [300, undefined],
      [5, 6],
    ]);
    expect(first.requests[4].body.n_predict).toBe(50); // reserved for 50: llama.cpp reads n_predict first
  });

  test('token_limit_field = "none" adds nothing and moves nothing', async () => {
    const { app, first } = appOver({ token_limit_field: "none" });
    for (const extra of [{}, { max_completion_tokens: 9 }]) expect((await app.chat({ model: "paid", ...ASK, ...extra })).status).toBe(200);
    expect(sentLimits(first)).toEqual([
      [undefined, undefined],
      [undefined, 9],
    ]);
  });

  test("a free model, or one whose completions cost nothing, is sent no limit", async () => {
    const { app, first } = appOver();
    for (const model of ["free", "prompt-only"]) expect((await app.chat({ model, ...ASK })).status).toBe(200);
    expect(sentLimits(first)).toEqual([
      [undefined, undefined],
      [undefined, undefined],
    ]);
  });

  test("in each upstream's token_limit_field, also on failover from one to the other", async () => {
    const { app, first, second } = appOver({}, true);
    expect((await app.chat({ model: "paid", ...ASK })).status).toBe(200);
    expect(sentLimits(first)).toEqual([[300, undefined]]);
    expect(second.requests.map((r) => ["max_tokens" in r.body, r.body.max_completion_tokens])).toEqual([[false, 300]]);
    // A client's max_tokens, sent as itself to the first and as max_completion_tokens to the second.
    expect((await app.chat({ model: "paid", ...ASK, max_tokens: 64 })).status).toBe(200);
    expect(sentLimits(first).at(-1)).toEqual([64, undefined]);
    expect(second.requests.map((r) => ["max_tokens" in r.body, r.body.max_completion_tokens]).at(-1)).toEqual([false, 64]);
  });
});

describe("the overdraw bound without a client limit", () => {
  test("a burst of requests that set no limit, to an upstream whose own default is 32k tokens, never takes the balance below zero", async () => {
    t = buildAuthApp({ routing: { default_max_tokens: 100 } });
    t.upstream.behaviour.ownDefaultMaxTokens = 32_768;
    const text = JSON.stringify(HELLO);
    const reservation = Math.ceil(text.length / 4) * PAID_PRICE.prompt + 100 * PAID_PRICE.completion;
    const { userId, auth } = await payingUser(t, 3 * reservation + 1);
    const statuses = await Promise.all(Array.from({ length: 20 }, () => t!.chat(text, auth).then(async (r) => (await r.text(), r.status))));
    expect(statuses.filter((s) => s === 200)).toHaveLength(3);
    expect(await getBalance(t.deps.db, userId)).toBeGreaterThanOrEqual(0);
  });
});

describe("a balance that does not cover the request's own limit", () => {
  for (const stream of [false, true]) {
    test(`50 concurrent ${stream ? "streams" : "requests"} asking for 1e9 tokens are each sent the limit the balance left pays for, and the balance stays at or above zero (regression: admitted on any positive balance, reserved 1e9 tokens, debited whatever came)`, async () => {
      t = buildAuthApp();
      // An upstream that generates whatever it is allowed: the limit it is sent is all that bounds the cost.
      t.upstream.behaviour.ownDefaultMaxTokens = 1_000_000;
      const body = JSON.stringify({ ...HELLO, stream, max_tokens: 1_000_000_000 });
      const prompt = Math.ceil(body.length / 4);
      const grant = 5 * leastToServe(JSON.parse(body)) + 7;
      const { userId, auth } = await payingUser(t, grant);
      const statuses = await Promise.all(Array.from({ length: 50 }, () => t!.chat(body, auth).then(async (r) => (await r.text(), r.status))));
      const served = statuses.filter((s) => s === 200).length;
      expect(served).toBeGreaterThan(0);
      expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
      const limits = t.upstream.requests.map((r) => r.body.max_tokens as number);
      expect(limits).toHaveLength(served);
      // The first is sent what the whole balance pays for after its prompt; none more, none below the minimum.
      expect(Math.max(...limits)).toBe(Math.floor((grant - prompt * PAID_PRICE.prompt) / PAID_PRICE.completion));
      expect(Math.min(...limits)).toBeGreaterThanOrEqual(MIN_COMPLETION_TOKENS);
      expect(t.identities.meter.outstanding(userId)).toBe(0);
      expect(await getBalance(t.deps.db, userId)).toBeGreaterThanOrEqual(0);
    });
  }

  test("n_predict, which llama.cpp reads before max_tokens, is cut with it", async () => {
    t = buildAuthApp();
    const { auth } = await payingUser(t, leastToServe({ ...HELLO, n_predict: 100_000 }) + 10 * PAID_PRICE.completion);
    expect((await t.chat({ ...HELLO, n_predict: 100_000 }, auth)).status).toBe(200);
    const sent = t.upstream.requests.at(-1)!.body;
    expect(sent.max_tokens).toBe(MIN_COMPLETION_TOKENS + 10);
    expect(sent.n_predict).toBe(MIN_COMPLETION_TOKENS + 10);
  });
});

describe("numbers the reservation counts", () => {
  test("n and max_completion_tokens must be integers in range, or null (regression: strings passed, reserved as absent)", async () => {
    const { app, first } = appOver();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ n: "8" }, "n"],
      [{ n: 0 }, "n"],
      [{ n: 129 }, "n"],
      [{ n: 1.5 }, "n"],
      [{ max_completion_tokens: "20000" }, "max_completion_tokens"],
      [{ max_completion_tokens: 0 }, "max_completion_tokens"],
      // llama.cpp's -1 is "no limit", which no reservation can cover.
      [{ n_predict: -1 }, "n_predict"],
      [{ n_predict: -2 }, "n_predict"],
      [{ n_predict: "100" }, "n_predict"],
    ];
    for (const [extra, param] of cases) {
      const response = await app.chat({ model: "paid", ...ASK, ...extra });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { param: string } }).error.param).toBe(param);
    }
    expect(first.requests).toHaveLength(0);
    for (const extra of [{ n: 2 }, { n: null }, { n: 128 }]) expect((await app.chat({ model: "paid", ...ASK, ...extra })).status).toBe(200);
  });

  test("llama.cpp's n_predict -1 (no limit) goes through to a free model, or one whose completions cost nothing; a priced one refuses it (regression: refused everywhere)", async () => {
    const { app, first } = appOver();
    for (const model of ["free", "prompt-only"]) expect((await app.chat({ model, ...ASK, n_predict: -1 })).status).toBe(200);
    expect(first.requests.map((r) => r.body.n_predict)).toEqual([-1, -1]);
    const refused = await app.chat({ model: "paid", ...ASK, n_predict: -1 });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe(
      'n_predict -1 sets no limit, and "paid" charges for completions: send a limit of at least 0',
    );
    expect(first.requests).toHaveLength(2);
    // 0 is a limit (no tokens), reserved as none given: passed on as it came.
    expect((await app.chat({ model: "paid", ...ASK, n_predict: 0 })).status).toBe(200);
    expect(first.requests[2].body.n_predict).toBe(0);
  });
});
