import { afterEach, describe, expect, test } from "bun:test";
import { captureLog } from "../support/log";
import { formatCredits, MAX_BALANCE_MICRO, MICRO_PER_CREDIT, parseCredits } from "../../src/credits/amount";
import { createDebitWriter, getBalance, grantCredits, listLedger, refundCredits } from "../../src/credits/ledger";
import { recentUsage } from "../../src/credits/usage";
import { maxCostMicro } from "../../src/credits/price";
import { MAX_COUNTED_TOKENS, tokensCostMicro } from "../../src/credits/cost";
import { buildConfig } from "../../src/config/load";
import { DEBITS_STALLED_MS } from "../../src/auth/paid-admission";
import { buildAuthApp, HELLO, HELLO_COST, HELLO_USAGE, leastToServe, PAID_PRICE, payingUser, type AuthTestApp, jsonOf } from "../auth/support";

let t: AuthTestApp;
afterEach(() => t?.close());

const paying = (micro: number) => payingUser(t, micro);

const ledgerSumMatchesBalance = async (userId: number): Promise<void> => {
  const sum = (await listLedger(t.deps.db, { userId, limit: 10_000 })).reduce((acc, row) => acc + row.micro, 0);
  expect(sum).toBe(await getBalance(t.deps.db, userId));
};

describe("amounts", () => {
  test("decimal strings and numbers to exact micro-credits", () => {
    expect(parseCredits("12.50")).toBe(12_500_000);
    expect(parseCredits(12.5)).toBe(12_500_000);
    expect(parseCredits("0.000001")).toBe(1);
    expect(parseCredits(" 3 ")).toBe(3_000_000);
    expect(parseCredits("1000000000")).toBe(1e15);
    // At most one billion credits, fraction included (regression: 1000000000.000001 was granted).
    for (const bad of [
      "0",
      "-1",
      "1.0000001",
      "1e3",
      "abc",
      "",
      "1,5",
      "1000000001",
      "1000000000.000001",
      1000000000.5,
      null,
      undefined,
      NaN,
      Infinity,
      -2,
      {},
    ]) {
      expect(parseCredits(bad)).toBeNull();
    }
    expect(formatCredits(12_500_000)).toBe("12.500000");
    expect(formatCredits(-50)).toBe("-0.000050");
  });
});

describe("prices", () => {
  test("tokens x price is exact for prices with decimals (regression: 100 tokens at 0.07 cost 8 micro-credits, not 7)", () => {
    expect(tokensCostMicro(100, 0, { prompt: 0.07, completion: 0 })).toBe(7);
    expect(tokensCostMicro(3, 7, { prompt: 0.1, completion: 0.2 })).toBe(2); // 0.3 + 1.4 = 1.7, rounded up
    expect(tokensCostMicro(10, 10, { prompt: 0.1, completion: 0.2 })).toBe(3);
    expect(tokensCostMicro(MAX_COUNTED_TOKENS, MAX_COUNTED_TOKENS, { prompt: 999_999.999999, completion: 1_000_000 })).toBe(1_999_999_999_999_000);
    expect(tokensCostMicro(1, 0, { prompt: 0.000001, completion: 0 })).toBe(1);
    expect(tokensCostMicro(0, 0, { prompt: 5, completion: 5 })).toBe(0);
  });

  test("a price with more than 6 decimals is a config error", () => {
    const models = (price: Record<string, number>) => ({
      upstreams: [{ name: "u", base_url: "http://127.0.0.1:1/v1" }],
      models: [{ id: "m", targets: [{ upstream: "u" }], price }],
    });
    expect(() => buildConfig(models({ prompt: 0.0000001 }), { env: {} })).toThrow("models[0].price.prompt: at most 6 decimal places");
    expect(() => buildConfig(models({ completion: 12.3456789 }), { env: {} })).toThrow("models[0].price.completion: at most 6 decimal places");
    // However small the excess (regression: 1.0000000009 passed, and was charged as 1).
    for (const completion of [1.0000000009, 0.0000010004, 0.0000000001]) {
      expect(() => buildConfig(models({ completion }), { env: {} })).toThrow("models[0].price.completion: at most 6 decimal places");
    }
    expect(buildConfig(models({ prompt: 0.07, completion: 999_999.999999 }), { env: {} }).config.models[0].price).toEqual({
      prompt: 0.07,
      completion: 999_999.999999,
      request: 0,
    });
  });

  test("the reservation covers n choices of the larger of max_tokens and max_completion_tokens", () => {
    const price = { prompt: 0, completion: 1 };
    const cost = (body: Record<string, unknown>) => maxCostMicro({ price, body, bodyBytes: 0, defaultMaxTokens: 4096 });
    expect(cost({})).toBe(4096);
    expect(cost({ max_tokens: 100 })).toBe(100);
    expect(cost({ max_tokens: 100, n: 50 })).toBe(5000);
    expect(cost({ n: 2 })).toBe(8192);
    expect(cost({ max_completion_tokens: 1, max_tokens: 4000 })).toBe(4000);
    expect(cost({ max_completion_tokens: 300, max_tokens: 20 })).toBe(300);
    expect(cost({ max_tokens: 100, n: 1e9 })).toBe(100 * 128);
    expect(cost({ max_tokens: 100, n: "3" })).toBe(100);
    expect(cost({ max_tokens: 1e308, n: 128 })).toBe(MAX_COUNTED_TOKENS);
  });
});

describe("ledger", () => {
  test("grants and refunds move the balance, and the ledger sums to it", async () => {
    t = buildAuthApp();
    const { userId } = await paying(0);
    expect(await getBalance(t.deps.db, userId)).toBe(0);
    expect(await grantCredits(t.deps.db, { userId, micro: 2_000_000, note: "welcome" })).toBe(2_000_000);
    expect(await refundCredits(t.deps.db, { userId, micro: 500, requestId: "req_x" })).toBe(2_000_500);
    expect(() => grantCredits(t.deps.db, { userId, micro: 0 })).toThrow();
    expect(() => grantCredits(t.deps.db, { userId, micro: 1.5 })).toThrow();
    await ledgerSumMatchesBalance(userId);
  });

  test("a balance stays an exact integer: a grant that would pass 9 billion credits writes nothing", async () => {
    t = buildAuthApp();
    const { userId } = await paying(0);
    const billion = 1_000_000_000 * MICRO_PER_CREDIT;
    for (let i = 1; i <= 8; i++) expect(await grantCredits(t.deps.db, { userId, micro: billion })).toBe(i * billion);
    expect(await grantCredits(t.deps.db, { userId, micro: billion + 1 })).toBeNull();
    expect(await refundCredits(t.deps.db, { userId, micro: billion + 1 })).toBeNull();
    expect(await getBalance(t.deps.db, userId)).toBe(8 * billion);
    expect(await listLedger(t.deps.db, { userId })).toHaveLength(8);
    expect(await grantCredits(t.deps.db, { userId, micro: billion })).toBe(MAX_BALANCE_MICRO);
    expect(Number.isSafeInteger(MAX_BALANCE_MICRO)).toBe(true);
    await ledgerSumMatchesBalance(userId);
  });
});

describe("spending", () => {
  test("a debit batch is summed per user and model: one ledger row each, with the request id when it covers one request", async () => {
    t = buildAuthApp();
    const [a, b] = [await paying(1_000_000), await paying(1_000_000)];
    // Seven requests for each of 2 users x 5 models, then one more of user a on a sixth model.
    const debits = Array.from({ length: 70 }, (_, i) => ({
      userId: i % 2 ? a.userId : b.userId,
      keyId: null,
      micro: i + 1,
      requestId: `req_${i}`,
      model: `m${i % 5}`,
      at: t.clock.now + i,
    }));
    debits.push({ userId: a.userId, keyId: null, micro: 1_000, requestId: "req_solo", model: "solo", at: t.clock.now });
    createDebitWriter(t.deps.db)(debits);
    for (const user of [a, b]) {
      const mine = debits.filter((d) => d.userId === user.userId);
      const expected = [...new Set(mine.map((d) => d.model))].map((model) => {
        const group = mine.filter((d) => d.model === model);
        const single = group.length === 1;
        return {
          model,
          micro: -group.reduce((sum, d) => sum + d.micro, 0),
          requestId: single ? group[0].requestId : null,
          note: single ? null : `${group.length} requests`,
          createdAt: Math.max(...group.map((d) => d.at)),
        };
      });
      const rows = (await listLedger(t.deps.db, { userId: user.userId, limit: 100 })).filter((row) => row.kind === "debit");
      const byModel = (x: { model: string | null }, y: { model: string | null }): number => String(x.model).localeCompare(String(y.model));
      expect(rows.map(({ model, micro, requestId, note, createdAt }) => ({ model, micro, requestId, note, createdAt })).sort(byModel)).toEqual(
        expected.sort(byModel),
      );
      expect(await getBalance(t.deps.db, user.userId)).toBe(1_000_000 - mine.reduce((sum, d) => sum + d.micro, 0));
      await ledgerSumMatchesBalance(user.userId);
    }
    expect((await listLedger(t.deps.db, { userId: a.userId })).filter((row) => row.kind === "debit")).toHaveLength(6);
  });

  test("a JSON completion debits the reported usage at the model's price, committed before the answer is returned (regression: queued for up to 250 ms, lost in a crash)", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1_000_000);
    const response = await t.chat(HELLO, auth);
    expect(response.status).toBe(200);
    const body = await jsonOf(response);
    expect(body.usage.prompt_tokens).toBe(HELLO_USAGE.prompt);
    expect(t.identities.meter.outstanding(userId)).toBe(0); // written, nothing queued
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000 - HELLO_COST);
    const debit = (await listLedger(t.deps.db, { userId }))[0];
    expect(debit).toMatchObject({ kind: "debit", micro: -HELLO_COST, model: "paid-model", requestId: response.headers.get("x-request-id") });
    expect(t.records.at(-1)?.costMicro).toBe(HELLO_COST);
    await ledgerSumMatchesBalance(userId);
  });

  test("a streamed completion is debited from the usage chunk, which the client did not ask for and does not see", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1_000_000);
    const response = await t.chat({ ...HELLO, stream: true }, auth);
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain("data: [DONE]");
    expect(text).not.toContain('"choices":[]'); // the usage-only chunk is stripped
    expect(text).not.toContain('"prompt_tokens"');
    // Written before the stream's last event went out.
    expect(t.identities.meter.outstanding(userId)).toBe(0);
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000 - HELLO_COST);
    await ledgerSumMatchesBalance(userId);
  });

  test("402 insufficient_credits at zero and below zero; free models still work and are never debited", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(0);
    const refused = await t.chat(HELLO, auth);
    expect(refused.status).toBe(402);
    expect(refused.headers.get("x-ratelimit-limit-requests")).toBe("60");
    const body = await jsonOf(refused);
    expect(body.error).toMatchObject({ code: "insufficient_credits", type: "insufficient_quota" });
    expect(body.error.message).toContain("0.000000");
    const before = t.upstream.chatCount();
    const free = await t.chat({ ...HELLO, model: "free-model" }, auth);
    expect(free.status).toBe(200);
    await t.chat({ ...HELLO, model: "free-model", stream: true }, auth).then((r) => r.text());
    t.identities.meter.flush();
    expect(t.upstream.chatCount()).toBe(before + 2);
    expect(await listLedger(t.deps.db, { userId })).toHaveLength(0);
    // Below zero (after an overdraw) is refused too.
    t.deps.db.$client.run("INSERT INTO balances (user_id, micro) VALUES (?, -5)", [userId]);
    expect((await t.chat(HELLO, auth)).status).toBe(402);
  });

  test("the request path keeps a read balance, and every change this process makes reaches the next request", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(0);
    expect((await t.chat(HELLO, auth)).status).toBe(402); // the balance, 0, is now kept in memory
    await grantCredits(t.deps.db, { userId, micro: leastToServe() });
    expect((await t.chat(HELLO, auth)).status).toBe(200); // the grant replaced it
    // The debit takes the stored balance below what a request needs.
    expect(await getBalance(t.deps.db, userId)).toBe(leastToServe() - HELLO_COST);
    expect((await t.chat(HELLO, auth)).status).toBe(402); // not served on the balance from before the debit
    await refundCredits(t.deps.db, { userId, micro: HELLO_COST });
    expect((await t.chat(HELLO, auth)).status).toBe(200);
    await ledgerSumMatchesBalance(userId);
  });

  test("session callers are metered like key callers", async () => {
    t = buildAuthApp();
    const user = await t.user("web@example.com");
    await grantCredits(t.deps.db, { userId: user.id, micro: 1_000_000 });
    const response = await t.chat(HELLO, { cookie: `mg_session=${await t.session(user.id)}`, origin: "http://localhost" });
    expect(response.status).toBe(200);
    t.identities.meter.flush();
    expect(await getBalance(t.deps.db, user.id)).toBe(1_000_000 - HELLO_COST);
    expect(t.records.at(-1)).toMatchObject({ identity: "session", userId: user.id, costMicro: HELLO_COST });
  });

  test("while the database refuses debits for more than DEBITS_STALLED_MS, paid requests are paused with a 503; free ones go on", async () => {
    t = buildAuthApp();
    const { auth } = await paying(1_000_000);
    const captured = captureLog();
    try {
      t.deps.db.$client.run("PRAGMA query_only = 1"); // every write fails until switched back
      expect((await t.chat(HELLO, auth)).status).toBe(200); // its debit's commit fails; the answer goes out
      t.clock.advance(DEBITS_STALLED_MS);
      expect((await t.chat(HELLO, auth)).status).toBe(200); // not yet past the bound
      t.clock.advance(1);
      const paused = await t.chat(HELLO, auth);
      expect(paused.status).toBe(503);
      expect(paused.headers.get("retry-after")).toBe("5");
      expect((await jsonOf(paused)).error).toMatchObject({ code: "service_unavailable", message: expect.stringContaining("Paid models are paused") });
      expect((await t.chat({ ...HELLO, model: "free-model" }, auth)).status).toBe(200);
      t.deps.db.$client.run("PRAGMA query_only = 0");
      t.clock.advance(2_000); // past the retry's backoff
      t.identities.meter.flush();
      expect((await t.chat(HELLO, auth)).status).toBe(200);
    } finally {
      captured.restore();
    }
  });

  test("a debit batch that fails to write stays queued, still counts against the balance, and is written once later", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1_000_000);
    const captured = captureLog();
    t.deps.db.$client.run("PRAGMA query_only = 1"); // every write fails until switched back
    expect((await t.chat(HELLO, auth)).status).toBe(200);
    t.deps.db.$client.run("PRAGMA query_only = 0");
    expect(captured.lines()[0]).toContain("credits: write failed, 1 row(s) kept to retry");
    captured.restore();
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000);
    expect(t.identities.meter.outstanding(userId)).toBe(HELLO_COST);
    expect((await t.chat(HELLO, auth)).status).toBe(200);
    t.clock.advance(250); // past the retry's backoff
    t.identities.meter.flush();
    expect(t.identities.meter.outstanding(userId)).toBe(0);
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000 - 2 * HELLO_COST);
    // Both requests' debits, written together: one row for the user and model, each cost once.
    expect((await listLedger(t.deps.db, { userId })).filter((row) => row.kind === "debit")).toMatchObject([
      { micro: -2 * HELLO_COST, note: "2 requests", requestId: null },
    ]);
    await ledgerSumMatchesBalance(userId);
  });

  test("a failed upstream call releases its reservation and costs nothing", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1_000_000);
    t.upstream.behaviour.failWith = 500;
    expect((await t.chat(HELLO, auth)).status).toBe(502);
    t.identities.meter.flush();
    expect(t.identities.meter.outstanding(userId)).toBe(0);
    expect(await getBalance(t.deps.db, userId)).toBe(1_000_000);
  });
});

describe("concurrency bound", () => {
  // The reservation is the body's bytes / 4 at the prompt price plus the completion bound
  // (the larger of max_completion_tokens and max_tokens) at the completion price, Content-Length sent or not.
  for (const { name, extra, sendLength } of [
    { name: "max_tokens, Content-Length sent", extra: { max_tokens: 10 }, sendLength: true },
    { name: "max_completion_tokens, above max_tokens", extra: { max_completion_tokens: 10, max_tokens: 5 }, sendLength: true },
    { name: "a body without Content-Length (chunked)", extra: { max_tokens: 10 }, sendLength: false },
  ]) {
    test(`a burst is served only as far as the balance covers each reservation: never below zero (${name}; regression: one more was served on the remainder)`, async () => {
      t = buildAuthApp();
      const text = JSON.stringify({ ...HELLO, ...extra });
      const reservation = Math.ceil(text.length / 4) * PAID_PRICE.prompt + 10 * PAID_PRICE.completion;
      // Enough for three reservations and a bit: the remainder pays for no fourth.
      const { userId, auth } = await paying(3 * reservation + 1);
      const headers = sendLength ? { ...auth, "content-length": String(text.length) } : auth;
      const answers = await Promise.all(
        Array.from({ length: 50 }, () => t.chat(text, headers).then(async (r) => ({ status: r.status, text: await r.text() }))),
      );
      const statuses = answers.map((a) => a.status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(3);
      expect(statuses.filter((s) => s === 402)).toHaveLength(47);
      // What the served requests hold is said as an amount of its own (regression: "0.000001 (0.000123 of it held ...)").
      const refusal = JSON.parse(answers.find((a) => a.status === 402)!.text).error.message as string;
      expect(refusal).toMatch(
        /^Your credit balance is \d+\.\d{6}, and requests in flight or spent and not yet recorded hold \d+\.\d{6}; model "paid-model" is not free, and this request needs at least \d+\.\d{6}/,
      );
      t.identities.meter.flush();
      const balance = await getBalance(t.deps.db, userId);
      expect(balance).toBe(3 * reservation + 1 - 3 * HELLO_COST);
      expect(balance).toBeGreaterThanOrEqual(0);
      await ledgerSumMatchesBalance(userId);
    });
  }

  test("with one micro-credit left, none of a burst is served, whatever its max_tokens (regression: one was, and went to -9,999.999999 credits on max_tokens 1e9)", async () => {
    t = buildAuthApp();
    const { userId, auth } = await paying(1);
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        t.chat({ ...HELLO, max_tokens: i % 2 ? 6 : 1_000_000_000 }, auth).then(async (r) => ({ status: r.status, text: await r.text() })),
      ),
    );
    expect(answers.map((a) => a.status).every((s) => s === 402)).toBe(true);
    expect(JSON.parse(answers[1].text).error.message).toMatch(
      /^Your credit balance is 0\.000001; model "paid-model" is not free, and this request needs at least 0\.000\d{3} \(its prompt and a short answer\)/,
    );
    expect(t.upstream.chatCount()).toBe(0);
    t.identities.meter.flush();
    expect(await getBalance(t.deps.db, userId)).toBe(1);
  });
});

describe("recent usage", () => {
  test("per-model totals from the request log", async () => {
    t = buildAuthApp();
    const { userId } = await paying(0);
    const now = t.clock.now;
    const row = (model: string, cost: number) =>
      t.deps.db.$client.run(
        "INSERT INTO request_log (request_id, created_at, identity, user_id, model, status, prompt_tokens, completion_tokens, cost_micro) VALUES ('r', ?, 'api_key', ?, ?, 200, 3, 4, ?)",
        [now, userId, model, cost],
      );
    row("a", 10);
    row("a", 15);
    row("b", 100);
    expect(await recentUsage(t.deps.db, { userId, since: now - 1 })).toEqual([
      { model: "b", requests: 1, promptTokens: 3, completionTokens: 4, costMicro: 100 },
      { model: "a", requests: 2, promptTokens: 6, completionTokens: 8, costMicro: 25 },
    ]);
    expect(await recentUsage(t.deps.db, { since: now + 1 })).toEqual([]);
  });
});
