/**
 * Numbers the meter takes from outside: a client's max_tokens / max_completion_tokens and an
 * upstream's reported usage. A client's bound counts as a whole number of at most
 * MAX_COUNTED_TOKENS, so the credit check stays on and the books stay exact (regression: a
 * max_tokens of 1e308 made the reservation Infinity, and every later request of that user passed
 * the credit check). A reported usage is taken only when both counts are whole numbers of at least
 * 0; any other (negative, fractional, not a number, missing) is charged an estimate, as an answer
 * without one is; and no request is charged more than its reservation (regression: negative usage
 * was charged 0, and 1e30 tokens 1e9 of them, whatever max_tokens was).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { getBalance } from "../../src/credits/ledger";
import { MAX_COUNTED_TOKENS, usageFromJson } from "../../src/credits/cost";
import { buildAuthApp, HELLO, HELLO_COST, leastToServe, PAID_PRICE, payingUser, type AuthTestApp } from "../auth/support";
import type { MockBehaviour } from "../support/mock-upstream";

let t: AuthTestApp;
afterEach(() => t?.close());

const paying = (micro: number) => payingUser(t, micro);

async function statusOf(response: Promise<Response>): Promise<number> {
  const r = await response;
  await r.text();
  return r.status;
}

describe("a client's completion bound", () => {
  for (const field of ["max_tokens", "max_completion_tokens"]) {
    test(`a ${field} of 1e308 does not switch off the credit check`, async () => {
      t = buildAuthApp();
      // Enough for two requests: the first is cut to the balance, the third is refused.
      const { userId, auth } = await paying(leastToServe() + HELLO_COST);
      expect(await statusOf(t.chat({ ...HELLO, [field]: 1e308 }, auth))).toBe(200);
      expect(t.identities.meter.outstanding(userId)).toBe(0);
      expect(await statusOf(t.chat(HELLO, auth))).toBe(200);
      expect(await statusOf(t.chat(HELLO, auth))).toBe(402);
      expect(t.identities.meter.outstanding(userId)).toBe(0);
      expect(await getBalance(t.deps.db, userId)).toBe(leastToServe() - HELLO_COST);
    });
  }

  test("huge bounds among ordinary requests in one burst leave nothing held once all are settled", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1_000_000_000);
    const bodies = Array.from({ length: 40 }, (_, i) => (i % 4 === 0 ? { ...HELLO, max_tokens: 1e300 } : HELLO));
    const statuses = await Promise.all(bodies.map((body) => statusOf(t.chat(body, auth))));
    const served = statuses.filter((s) => s === 200).length;
    expect(served).toBeGreaterThan(0);
    expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
    expect(t.identities.meter.outstanding(userId)).toBe(0);
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000_000 - served * HELLO_COST);
  });
});

describe("an upstream's reported usage", () => {
  for (const stream of [false, true]) {
    test(`a count beyond any real one is charged at most the request's reservation (${stream ? "streamed" : "JSON"}; regression: 1e30 tokens were charged as 1e9, whatever max_tokens was)`, async () => {
      t = buildAuthApp();
      t.upstream.behaviour.usage = { prompt_tokens: 10, completion_tokens: 1e30 };
      const grant = 100 * MAX_COUNTED_TOKENS;
      const { userId, auth } = await paying(grant);
      const body = JSON.stringify({ ...HELLO, stream, max_tokens: 50 });
      expect(await statusOf(t.chat(body, auth))).toBe(200);
      const reservation = Math.ceil(body.length / 4) * PAID_PRICE.prompt + 50 * PAID_PRICE.completion;
      expect(t.records.at(-1)).toMatchObject({ promptTokens: 10, completionTokens: MAX_COUNTED_TOKENS, costMicro: reservation });
      expect(t.identities.meter.outstanding(userId)).toBe(0);
      expect(await getBalance(t.deps.db, userId)).toBe(grant - reservation);
    });
  }

  const unreported: Array<{ name: string; behaviour: MockBehaviour }> = [
    { name: "no usage at all", behaviour: { noUsage: true } },
    { name: "a usage without a number in it", behaviour: { usage: { prompt_tokens: "900", completion_tokens: { n: 1 }, total_tokens: 3 } } },
    // Regression: each of these was charged as 0 tokens (or rounded down), not estimated.
    { name: "a negative usage", behaviour: { usage: { prompt_tokens: -50, completion_tokens: -7 } } },
    { name: "a fractional usage", behaviour: { usage: { prompt_tokens: 0.5, completion_tokens: 7.9 } } },
    { name: "a usage missing its completion count", behaviour: { usage: { prompt_tokens: 3 } } },
  ];
  for (const [{ name, behaviour }, stream] of unreported.flatMap(
    (u) =>
      [
        [u, false],
        [u, true],
      ] as const,
  )) {
    test(`an answer with ${name} (${stream ? "streamed" : "JSON"}) is charged an estimate, not nothing`, async () => {
      t = buildAuthApp();
      Object.assign(t.upstream.behaviour, behaviour);
      const { userId, auth } = await paying(1_000_000);
      const body = JSON.stringify({ ...HELLO, stream });
      const response = await t.chat(body, auth);
      expect(response.status).toBe(200);
      const text = await response.text();
      // The prompt as reservations estimate it; the completion as a JSON answer's characters / 4,
      // or one token per event relayed.
      const prompt = Math.ceil(body.length / 4);
      const completion = stream ? text.split("\n\n").filter((e) => e.startsWith("data: {")).length : Math.ceil(text.length / 4);
      const cost = prompt * PAID_PRICE.prompt + completion * PAID_PRICE.completion;
      expect(t.records.at(-1)).toMatchObject({ status: 200, promptTokens: prompt, completionTokens: completion, costMicro: cost });
      expect(await getBalance(t.deps.db, userId)).toBe(1_000_000 - cost);
    });
  }

  for (const stream of [false, true]) {
    test(`an estimate never charges more completion tokens than the reservation was for (${stream ? "streamed" : "JSON"}; regression: max_tokens 1 was charged as 46, past the overdraw bound)`, async () => {
      t = buildAuthApp();
      Object.assign(t.upstream.behaviour, { noUsage: true, words: ["a", "b", "c", "d", "e"] });
      const { userId, auth } = await paying(1_000_000);
      const body = JSON.stringify({ ...HELLO, stream, max_tokens: 2 });
      expect(await statusOf(t.chat(body, auth))).toBe(200);
      const prompt = Math.ceil(body.length / 4);
      expect(t.records.at(-1)).toMatchObject({ promptTokens: prompt, completionTokens: 2, costMicro: prompt * PAID_PRICE.prompt + 2 * PAID_PRICE.completion });
      t.identities.meter.flush();
      expect(await getBalance(t.deps.db, userId)).toBe(1_000_000 - (prompt * PAID_PRICE.prompt + 2 * PAID_PRICE.completion));
    });
  }

  test("a usage object is a report only when both counts are whole numbers of at least 0", () => {
    expect(usageFromJson('{"choices":[],"usage":{"prompt_tokens":"1","completion_tokens":null}}')).toBeNull();
    expect(usageFromJson('{"choices":[],"usage":null}')).toBeNull();
    expect(usageFromJson('{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}}')).toBeNull();
    expect(usageFromJson('{"usage":{"prompt_tokens":3,"completion_tokens":-1}}')).toBeNull();
    expect(usageFromJson('{"usage":{"prompt_tokens":3,"completion_tokens":1.5}}')).toBeNull();
    expect(usageFromJson('{"usage":{"prompt_tokens":3,"completion_tokens":0}}')).toEqual({ prompt_tokens: 3, completion_tokens: 0 });
    expect(usageFromJson('{"usage":{"prompt_tokens":1e308,"completion_tokens":2}}')).toEqual({ prompt_tokens: MAX_COUNTED_TOKENS, completion_tokens: 2 });
  });

  test("the body's own usage is metered, not a `usage` key nested after it (regression: the last one anywhere was read, so a message's metadata could meter 100 tokens as 1)", () => {
    const own = '"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}';
    const nested = '"choices":[{"index":0,"message":{"role":"assistant","content":"hi","metadata":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}}]';
    expect(usageFromJson(`{${own},${nested}}`)).toEqual({ prompt_tokens: 100, completion_tokens: 50 });
    expect(usageFromJson(`{${nested}}`)).toBeNull();
    expect(usageFromJson(`{"x":{${own}}}`)).toBeNull();
    // Last and flat, as upstreams send it, with keys after it whose strings hold brackets and quotes.
    expect(usageFromJson(`{${nested},${own},"system_fingerprint":"fp_}]\\"{","service_tier":null}\n`)).toEqual({ prompt_tokens: 100, completion_tokens: 50 });
  });
});
