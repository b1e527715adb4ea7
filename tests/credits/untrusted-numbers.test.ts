/**
 * Numbers the meter takes from outside: a client's max_tokens / max_completion_tokens and an
 * upstream's reported usage. However large, negative or mistyped, they count as whole token
 * numbers of at most MAX_COUNTED_TOKENS, so the credit check stays on and the books stay exact;
 * and an answer the upstream reported no usage for is charged an estimate, not nothing.
 * (Regression: a max_tokens of 1e308 made the reservation Infinity; settling it left the user's
 * held amount NaN, and every later request of that user passed the credit check.)
 */
import { afterEach, describe, expect, test } from "bun:test";
import { getBalance, listLedger } from "../../src/credits/ledger";
import { MAX_COUNTED_TOKENS, usageFromJson } from "../../src/router/usage";
import { buildAuthApp, HELLO, HELLO_COST, PAID_PRICE, payingUser, type AuthTestApp } from "../auth/support";
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
      // Enough for one request and one micro-credit: the second request is admitted, the third is not.
      const { userId, auth } = await paying(HELLO_COST + 1);
      expect(await statusOf(t.chat({ ...HELLO, [field]: 1e308 }, auth))).toBe(200);
      expect(t.identities.meter.outstanding(userId)).toBe(HELLO_COST);
      t.identities.meter.flush();
      expect(t.identities.meter.outstanding(userId)).toBe(0);
      expect(await statusOf(t.chat(HELLO, auth))).toBe(200);
      expect(await statusOf(t.chat(HELLO, auth))).toBe(402);
      t.identities.meter.flush();
      expect(getBalance(t.deps.db, userId)).toBe(1 - HELLO_COST);
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
    expect(t.identities.meter.outstanding(userId)).toBe(served * HELLO_COST);
    t.identities.meter.flush();
    expect(t.identities.meter.outstanding(userId)).toBe(0);
    expect(getBalance(t.deps.db, userId)).toBe(1_000_000_000 - served * HELLO_COST);
  });
});

describe("an upstream's reported usage", () => {
  const cases: Array<{ name: string; usage: Record<string, unknown>; prompt: number; completion: number }> = [
    { name: "beyond any real count", usage: { prompt_tokens: 1e308, completion_tokens: 2 }, prompt: MAX_COUNTED_TOKENS, completion: 2 },
    { name: "negative and fractional", usage: { prompt_tokens: -50, completion_tokens: 7.9 }, prompt: 0, completion: 7 },
  ];
  for (const { name, usage, prompt, completion } of cases) {
    for (const stream of [false, true]) {
      test(`${name} (${stream ? "streamed" : "JSON"}) is counted as whole numbers within the cap`, async () => {
        t = buildAuthApp();
        t.upstream.behaviour.usage = usage;
        const grant = 100 * MAX_COUNTED_TOKENS;
        const { userId, auth } = await paying(grant);
        expect(await statusOf(t.chat({ ...HELLO, stream }, auth))).toBe(200);
        const cost = prompt * PAID_PRICE.prompt + completion * PAID_PRICE.completion;
        expect(t.records.at(-1)).toMatchObject({ promptTokens: prompt, completionTokens: completion, costMicro: cost });
        t.identities.meter.flush();
        expect(t.identities.meter.outstanding(userId)).toBe(0);
        expect(getBalance(t.deps.db, userId)).toBe(grant - cost);
        const debits = listLedger(t.deps.db, { userId }).filter((row) => row.kind === "debit");
        expect(debits).toHaveLength(cost > 0 ? 1 : 0);
      });
    }
  }

  const unreported: Array<{ name: string; behaviour: MockBehaviour }> = [
    { name: "no usage at all", behaviour: { noUsage: true } },
    { name: "a usage without a number in it", behaviour: { usage: { prompt_tokens: "900", completion_tokens: { n: 1 }, total_tokens: 3 } } },
  ];
  for (const [{ name, behaviour }, stream] of unreported.flatMap((u) => [[u, false], [u, true]] as const)) {
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
      t.identities.meter.flush();
      expect(getBalance(t.deps.db, userId)).toBe(1_000_000 - cost);
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
      expect(getBalance(t.deps.db, userId)).toBe(1_000_000 - (prompt * PAID_PRICE.prompt + 2 * PAID_PRICE.completion));
    });
  }

  test("a usage object without a number in it is no usage", () => {
    expect(usageFromJson('{"choices":[],"usage":{"prompt_tokens":"1","completion_tokens":null}}')).toBeNull();
    expect(usageFromJson('{"choices":[],"usage":null}')).toBeNull();
    expect(usageFromJson('{"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}}')).toEqual({ prompt_tokens: 3, completion_tokens: 0 });
  });

  test("the body's own usage is metered, not a `usage` key nested after it (regression: the last one anywhere was read, so a message's metadata could meter 100 tokens as 1)", () => {
    const own = '"usage":{"prompt_tokens":100,"completion_tokens":50,"total_tokens":150}';
    const nested = '"choices":[{"index":0,"message":{"role":"assistant","content":"hi","metadata":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}}]';
    expect(usageFromJson(`{${own},${nested}}`)).toEqual({ prompt_tokens: 100, completion_tokens: 50 });
    expect(usageFromJson(`{${nested}}`)).toBeNull();
    expect(usageFromJson(`{"x":{${own}}}`)).toBeNull();
    // Last and flat, as upstreams send it, with keys after it whose strings hold brackets and quotes.
    expect(usageFromJson(`{${nested},${own},"system_fingerprint":"fp_}]\\\"{","service_tier":null}\n`)).toEqual({ prompt_tokens: 100, completion_tokens: 50 });
  });
});
