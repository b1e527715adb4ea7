// Key policy through the real gate, meter and limiter (in-process, injected clock): model
// allowlist, budgets per UTC period and their bound under concurrency, tokens per minute, the
// per-user ceiling across keys, and a policy change applied from the next request.
import { afterEach, describe, expect, test } from "bun:test";
import { buildAuthApp, HELLO, jsonOf, leastToServe, PAID_PRICE, type AuthTestApp } from "./support";
import { grantCredits, getBalance, keySpendSince } from "../../src/credits/ledger";
import { updateKeyPolicy, resolveKeyId } from "../../src/auth/key-updates";
import type { PolicyChange } from "../../src/auth/key-policy";

let t: AuthTestApp | undefined;
afterEach(() => {
  t?.close();
  t = undefined;
});

/** A user with 1,000 credits and a key with `policy`. */
async function keyWith(app: AuthTestApp, policy: PolicyChange): Promise<{ userId: number; key: string; keyId: string; auth: Record<string, string> }> {
  const user = await app.user(`k${Math.random()}@example.com`);
  await grantCredits(app.deps.db, { userId: user.id, micro: 1_000_000_000, now: app.clock.now - 1 });
  const key = await app.key(user.id, policy);
  return { userId: user.id, key, keyId: (await resolveKeyId(app.deps.db, key))!, auth: { authorization: `Bearer ${key}` } };
}

const statusOf = async (r: Response): Promise<number> => (await r.text(), r.status);

describe("model allowlist", () => {
  test("a model outside the globs is 403 model_not_allowed, and absent from that key's /v1/models", async () => {
    t = buildAuthApp();
    const { auth } = await keyWith(t, { models: "free-*" });
    expect((await t.chat({ ...HELLO, model: "free-model" }, auth)).status).toBe(200);
    const denied = await t.chat(HELLO, auth);
    expect(denied.status).toBe(403);
    const body = await jsonOf(denied);
    expect(body.error.code).toBe("model_not_allowed");
    expect(body.error.type).toBe("permission_error");
    expect(body.error.message).toContain('"paid-model"');
    const listed = await jsonOf(await t.request("/v1/models", { headers: { ...auth, accept: "application/json" } }));
    expect(listed.data.map((m: { id: string }) => m.id)).toEqual(["free-model"]);
    expect((await t.request("/v1/models/paid-model", { headers: { ...auth, accept: "application/json" } })).status).toBe(404);
    // Without the key every model is listed, as before.
    const open = await jsonOf(await t.request("/v1/models", { headers: { accept: "application/json" } }));
    expect(open.data.map((m: { id: string }) => m.id).sort()).toEqual(["free-model", "paid-model"]);
  });
});

describe("budget", () => {
  test("a daily budget is refused with 402 budget_exceeded saying what was spent and when it resets, and works again the next UTC day", async () => {
    t = buildAuthApp();
    const budget = 3 * leastToServe();
    const { keyId, auth } = await keyWith(t, { budgetMicro: budget, budgetPeriod: "day" });
    let refused: Response | null = null;
    for (let i = 0; i < 100 && refused === null; i++) {
      const r = await t.chat(HELLO, auth);
      if (r.status === 200) await r.text();
      else refused = r;
    }
    expect(refused?.status).toBe(402);
    const body = await jsonOf(refused!);
    expect(body.error.code).toBe("budget_exceeded");
    expect(body.error.resets_at).toBe("2026-06-17T00:00:00.000Z");
    expect(body.error.message).toContain("per day");
    const spent = await keySpendSince(t.deps.db, keyId, Date.UTC(2026, 5, 16));
    expect(spent).toBeGreaterThan(0);
    expect(spent).toBeLessThanOrEqual(budget);
    expect(body.error.spent).toBe((spent / 1e6).toFixed(6));
    t.clock.advance(12 * 3_600_000); // midnight UTC
    expect(await statusOf(await t.chat(HELLO, auth))).toBe(200);
  });

  for (const stream of [false, true]) {
    test(`50 concurrent ${stream ? "streams" : "requests"} asking for 1e9 tokens on a tiny budget spend at most the budget (the balance is far larger)`, async () => {
      t = buildAuthApp();
      t.upstream.behaviour.ownDefaultMaxTokens = 1_000_000;
      const body = { ...HELLO, stream, max_tokens: 1_000_000_000 };
      const budget = 4 * leastToServe(body) + 7;
      const { userId, keyId, auth } = await keyWith(t, { budgetMicro: budget, budgetPeriod: "total" });
      const statuses = await Promise.all(Array.from({ length: 50 }, () => t!.chat(body, auth).then(statusOf)));
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
      expect(statuses.every((s) => s === 200 || s === 402)).toBe(true);
      const spent = await keySpendSince(t.deps.db, keyId, 0);
      expect(spent).toBeGreaterThan(0);
      expect(spent).toBeLessThanOrEqual(budget);
      expect(await getBalance(t.deps.db, userId)).toBe(1_000_000_000 - spent);
    });
  }

  test("one huge max_tokens request on a nearly spent budget is cut to what is left, not refused and not overdrawn", async () => {
    t = buildAuthApp();
    t.upstream.behaviour.ownDefaultMaxTokens = 1_000_000;
    const body = { ...HELLO, max_tokens: 1_000_000_000 };
    const budget = leastToServe(body) + 5 * PAID_PRICE.completion;
    const { keyId, auth } = await keyWith(t, { budgetMicro: budget, budgetPeriod: "month" });
    expect(await statusOf(await t.chat(body, auth))).toBe(200);
    expect(t.upstream.requests.at(-1)!.body.max_tokens).toBeLessThan(1_000);
    expect(await keySpendSince(t.deps.db, keyId, 0)).toBeLessThanOrEqual(budget);
  });
});

describe("tokens per minute", () => {
  test("a burst past the key's tokens per minute is 429 with the x-ratelimit-*-tokens headers, and the minute refills it", async () => {
    t = buildAuthApp();
    const { auth } = await keyWith(t, { tokensPerMinute: 40 });
    const statuses: number[] = [];
    let refused: Response | null = null;
    for (let i = 0; i < 10 && refused === null; i++) {
      const r = await t.chat({ ...HELLO, model: "free-model" }, auth);
      statuses.push(r.status);
      if (r.status === 429) refused = r;
      else await r.text();
    }
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(0);
    expect(refused?.status).toBe(429);
    expect(refused!.headers.get("x-ratelimit-limit-tokens")).toBe("40");
    expect(refused!.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
    expect(refused!.headers.get("x-ratelimit-reset-tokens")).toMatch(/^(\d+m)?\d+s$/);
    expect(Number(refused!.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await jsonOf(refused!)).error.message).toContain("40 tokens per minute");
    t.clock.advance(120_000);
    expect(await statusOf(await t.chat({ ...HELLO, model: "free-model" }, auth))).toBe(200);
  });

  test("[limits] user caps one user's keys together: a second key does not double the limit", async () => {
    t = buildAuthApp({ limits: { user: { per_minute: 3 } } });
    const user = await t.user("two-keys@example.com");
    const keys = [await t.key(user.id), await t.key(user.id)].map((k) => ({ authorization: `Bearer ${k}` }));
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push(await statusOf(await t.chat({ ...HELLO, model: "free-model" }, keys[i % 2])));
    expect(statuses).toEqual([200, 200, 200, 429, 429, 429]);
  });
});

test("a policy change applies from the next request, and clearing it lifts it", async () => {
  t = buildAuthApp();
  const { keyId, auth } = await keyWith(t, {});
  expect(await statusOf(await t.chat(HELLO, auth))).toBe(200);
  await updateKeyPolicy(t.deps.db, keyId, { models: "free-model" });
  expect(await statusOf(await t.chat(HELLO, auth))).toBe(403);
  await updateKeyPolicy(t.deps.db, keyId, { models: null });
  expect(await statusOf(await t.chat(HELLO, auth))).toBe(200);
});
