/**
 * SpendAuth verification through the in-process app: signatures made by viem's signTypedData
 * with known keys verify; every mutation is refused with its own error; replays are refused, also
 * under concurrency; the 402 tells the client what to sign.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { BASE_CONFIG, CHAIN_ID, CLIENT, COMMITMENT, CONTRACT, KEYS, OPERATOR, fields, header, sign, signedHeader, spendAuthApp } from "./helpers";
import { concat, encodeAbiParameters, keccak256, parseAbiParameters, recoverAddress, toHex } from "viem";
import { GatewayError } from "../../src/errors";
import { listSettlements } from "../../src/spendauth/settlements";
import { MAX_COUNTED_TOKENS } from "../../src/credits/cost";

let mock: MockUpstream;
let config: typeof BASE_CONFIG;

beforeAll(() => {
  mock = startMockUpstream();
  // One attempt and no cooldown, so a deliberately failing upstream does not trip the breaker.
  config = { ...BASE_CONFIG, upstreams: [{ name: "mock", base_url: mock.url }], routing: { max_attempts: 1, cooldown_failures: 1000 } } as typeof BASE_CONFIG;
});
afterAll(() => mock.stop());

const BODY = { model: "paid", messages: [{ role: "user", content: "hi" }], max_tokens: 100 };

async function errorOf(response: Response): Promise<{ status: number; code: string; param: string | null; message: string }> {
  const body = (await response.json()) as { error: { code: string; param: string | null; message: string } };
  return { status: response.status, ...body.error };
}

describe("signatures from viem signTypedData", () => {
  test("a known key's signature is byte-for-byte the expected vector", async () => {
    const message = fields({ expiry: 1_900_000_000n, nonce: 7n, amount: 500_000n });
    const signature = await sign(message);
    expect(signature).toBe(
      "0x994cdce282c01d10b6a0add10c14531f38a70584f6443166a1a5f4b549973486058a61922c6f3e91fa30b852259ee2bfe31950bdc9370d34f31d8ae9098f590c1c",
    );
    // The digest the contract computes by hand (abi.encode of the typehash and fields) is the one signed.
    const typehash = keccak256(
      toHex("SpendAuthorization(bytes32 commitment,uint64 serviceId,uint8 jobIndex,uint256 amount,address operator,uint256 nonce,uint64 expiry)"),
    );
    const domainSeparator = keccak256(
      encodeAbiParameters(parseAbiParameters("bytes32, bytes32, bytes32, uint256, address"), [
        keccak256(toHex("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)")),
        keccak256(toHex("ShieldedCredits")),
        keccak256(toHex("1")),
        BigInt(CHAIN_ID),
        CONTRACT,
      ]),
    );
    const structHash = keccak256(
      encodeAbiParameters(parseAbiParameters("bytes32, bytes32, uint64, uint8, uint256, address, uint256, uint64"), [
        typehash,
        message.commitment,
        message.serviceId,
        message.jobIndex,
        message.amount,
        message.operator,
        message.nonce,
        message.expiry,
      ]),
    );
    const digest = keccak256(concat(["0x1901", domainSeparator, structHash]));
    expect(await recoverAddress({ hash: digest, signature })).toBe(CLIENT.address);
  });

  test("a valid authorization is served and queued for settlement", async () => {
    const app = spendAuthApp(config);
    const response = await app.chat(BODY, { "x-payment-signature": await signedHeader() });
    expect(response.status).toBe(200);
    expect(((await response.json()) as { choices: unknown[] }).choices.length).toBe(1);
    const rows = await listSettlements(app.deps.db);
    expect(rows.length).toBe(1);
    expect(rows[0]).toMatchObject({ commitment: COMMITMENT, nonce: "0", amount: "1000000", state: "pending" });
    expect(app.records.at(-1)?.identity).toBe("spend_auth");
  });

  test("hex-encoded JSON and JSON numbers are accepted", async () => {
    const app = spendAuthApp(config);
    const message = fields({ nonce: 3n });
    const signature = await sign(message);
    const json = JSON.stringify({ ...JSON.parse(header(message, signature)), serviceId: 1, nonce: 3, expiry: Number(message.expiry) });
    const hex = `0x${Buffer.from(json).toString("hex")}`;
    expect((await app.chat(BODY, { "x-payment-signature": hex })).status).toBe(200);
  });

  test("v given as y-parity (0/1) is accepted", async () => {
    const app = spendAuthApp(config);
    const message = fields({ nonce: 4n });
    const signature = await sign(message);
    const parity = (Number.parseInt(signature.slice(130), 16) - 27).toString(16).padStart(2, "0");
    expect((await app.chat(BODY, { "x-payment-signature": header(message, signature.slice(0, 130) + parity) })).status).toBe(200);
  });
});

describe("each mutation is refused with its own error", () => {
  const flip = (hex: string, at: number): string => hex.slice(0, at) + (hex[at] === "1" ? "2" : "1") + hex.slice(at + 1);
  const cases: Array<[string, (h: Record<string, unknown>) => void, Parameters<typeof sign>[1], { status: number; code: string; param: string | null }]> = [
    ["amount raised after signing", (h) => (h.amount = "2000000"), {}, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    ["operator", (h) => (h.operator = CLIENT.address), {}, { status: 401, code: "invalid_spend_auth", param: "operator" }],
    ["serviceId", (h) => (h.serviceId = "2"), {}, { status: 401, code: "invalid_spend_auth", param: "serviceId" }],
    ["nonce", (h) => (h.nonce = "99"), {}, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    ["expiry extended", (h) => (h.expiry = String(Number(h.expiry) + 60)), {}, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    ["commitment", (h) => (h.commitment = flip(h.commitment as string, 10)), {}, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    ["chain id", () => {}, { chainId: 1 }, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    [
      "verifying contract",
      () => {},
      { contract: "0x000000000000000000000000000000000000dEaD" },
      { status: 401, code: "invalid_spend_auth", param: "signature" },
    ],
    [
      "v value flipped",
      (h) => (h.signature = (h.signature as string).slice(0, 130) + ((h.signature as string).endsWith("1b") ? "1c" : "1b")),
      {},
      { status: 401, code: "invalid_spend_auth", param: "signature" },
    ],
    [
      "v value out of range",
      (h) => (h.signature = `${(h.signature as string).slice(0, 130)}1d`),
      {},
      { status: 401, code: "invalid_spend_auth", param: "signature" },
    ],
    ["truncated signature", (h) => (h.signature = (h.signature as string).slice(0, 128)), {}, { status: 401, code: "invalid_spend_auth", param: "signature" }],
    ["signer not allowed", () => {}, { key: KEYS.stranger }, { status: 401, code: "invalid_spend_auth", param: "signature" }],
  ];
  for (const [name, mutate, signOptions, expected] of cases) {
    test(name, async () => {
      const app = spendAuthApp(config);
      const h = JSON.parse(await signedHeader({}, signOptions)) as Record<string, unknown>;
      mutate(h);
      const error = await errorOf(await app.chat(BODY, { "x-payment-signature": JSON.stringify(h) }));
      expect(error).toMatchObject(expected);
      expect((await listSettlements(app.deps.db)).length).toBe(0);
    });
  }

  test("an expired authorization names expiry", async () => {
    const app = spendAuthApp(config);
    const h = await signedHeader({ expiry: BigInt(Math.floor(Date.now() / 1000) - 31) });
    expect(await errorOf(await app.chat(BODY, { "x-payment-signature": h }))).toMatchObject({ status: 401, code: "invalid_spend_auth", param: "expiry" });
  });

  test("an authorization expiring within 30 s is refused: it could never be settled (regression: 30 s past expiry passed)", async () => {
    const app = spendAuthApp(config);
    const nowS = Math.floor(Date.now() / 1000);
    for (const expiry of [nowS - 20, nowS, nowS + 20]) {
      const h = await signedHeader({ expiry: BigInt(expiry), nonce: BigInt(expiry - nowS + 100) });
      expect(await errorOf(await app.chat(BODY, { "x-payment-signature": h }))).toMatchObject({ status: 401, code: "invalid_spend_auth", param: "expiry" });
    }
    const h = await signedHeader({ expiry: BigInt(nowS + 60) });
    expect((await app.chat(BODY, { "x-payment-signature": h })).status).toBe(200);
    expect(await listSettlements(app.deps.db)).toHaveLength(1);
  });

  for (const field of ["commitment", "serviceId", "jobIndex", "amount", "operator", "nonce", "expiry", "signature"]) {
    test(`missing ${field} is named`, async () => {
      const app = spendAuthApp(config);
      const h = JSON.parse(await signedHeader()) as Record<string, unknown>;
      delete h[field];
      const error = await errorOf(await app.chat(BODY, { "x-payment-signature": JSON.stringify(h) }));
      expect(error).toMatchObject({ status: 401, code: "invalid_spend_auth", param: field });
      expect(error.message).toContain(field);
    });
  }

  test("garbage that is not JSON is refused without a param", async () => {
    const app = spendAuthApp(config);
    expect(await errorOf(await app.chat(BODY, { "x-payment-signature": "not json at all" }))).toMatchObject({
      status: 401,
      code: "invalid_spend_auth",
      param: null,
    });
  });
});

describe("price", () => {
  test("an amount below the request's maximum cost gets a 402 that says how much to sign", async () => {
    const app = spendAuthApp(config);
    // 100 max tokens at 2 credits/1M plus a small prompt at 1 credit/1M, in units_per_credit 1e6.
    const response = await app.chat(BODY, { "x-payment-signature": await signedHeader({ amount: 10n }) });
    const required = response.headers.get("x-payment-required");
    expect(response.status).toBe(402);
    // The credit meter's maximum cost: the body's bytes / 4 as prompt tokens, plus max_tokens.
    expect(Number(required)).toBe(Math.ceil(JSON.stringify(BODY).length / 4) * 1 + 100 * 2);
    expect(response.headers.get("x-payment-required-operator")).toBe(OPERATOR.address.toLowerCase());
    expect(response.headers.get("x-payment-required-contract")).toBe(CONTRACT.toLowerCase());
    expect(response.headers.get("x-payment-required-chain-id")).toBe(String(CHAIN_ID));
    const body = (await response.json()) as { error: { code: string; required_amount: string } };
    expect(body.error).toMatchObject({ code: "payment_required", required_amount: required! });
    const again = await app.chat(BODY, { "x-payment-signature": await signedHeader({ amount: BigInt(required!) }) });
    expect(again.status).toBe(200);
  });

  test("a max_tokens of 1e308 asks for the price of MAX_COUNTED_TOKENS (it was a 500)", async () => {
    const app = spendAuthApp(config);
    const body = { ...BODY, max_tokens: 1e308 };
    const response = await app.chat(body, { "x-payment-signature": await signedHeader({ amount: 10n }) });
    expect(response.status).toBe(402);
    expect(response.headers.get("x-payment-required")).toBe(String(Math.ceil(JSON.stringify(body).length / 4) * 1 + MAX_COUNTED_TOKENS * 2));
  });

  test("a free model takes an amount of zero, and uses up no nonce and queues nothing to settle (regression: an authorization of 0 was sent on-chain and could never be claimed)", async () => {
    const app = spendAuthApp(config);
    const h = await signedHeader({ amount: 0n, nonce: 9n });
    for (let i = 0; i < 2; i++) expect((await app.chat({ ...BODY, model: "free" }, { "x-payment-signature": h })).status).toBe(200);
    expect(await listSettlements(app.deps.db)).toHaveLength(0);
    // The nonce is still the client's, for a paid request.
    expect((await app.chat(BODY, { "x-payment-signature": await signedHeader({ nonce: 9n }) })).status).toBe(200);
    expect(await listSettlements(app.deps.db)).toHaveLength(1);
  });
});

describe("replay", () => {
  test("a second use of one authorization is nonce_replay", async () => {
    const app = spendAuthApp(config);
    const h = await signedHeader({ nonce: 42n });
    expect((await app.chat(BODY, { "x-payment-signature": h })).status).toBe(200);
    expect(await errorOf(await app.chat(BODY, { "x-payment-signature": h }))).toMatchObject({ status: 401, code: "nonce_replay", param: "nonce" });
  });

  test("a nonce whose settlement went dead before it was authorized on-chain can be signed again, once, expiring later (regression: nonce_replay until the dead one expired, and the commitment's later nonces could not be claimed meanwhile)", async () => {
    let limited = false;
    const app = spendAuthApp(config, { rateLimit: () => (limited ? new GatewayError("rate_limit_exceeded", "slow down") : {}) });
    const nowS = Math.floor(Date.now() / 1000);
    const first = await signedHeader({ nonce: 5n, expiry: BigInt(nowS + 300) });
    expect((await app.chat(BODY, { "x-payment-signature": first })).status).toBe(200);
    app.deps.db.$client.run("UPDATE settlements SET state = 'dead', attempts = 8, last_error = 'rpc unreachable'");
    const replay = async (h: string) => (await errorOf(await app.chat(BODY, { "x-payment-signature": h }))).code;

    expect(await replay(first)).toBe("nonce_replay");
    expect(await replay(await signedHeader({ nonce: 5n, expiry: BigInt(nowS + 200) }))).toBe("nonce_replay");
    // A replacement refused after taking the nonce (here: rate-limited) gives it back to the dead
    // one, not free: the dead one, still unexpired, must not be served again.
    limited = true;
    expect(await replay(await signedHeader({ nonce: 5n, expiry: BigInt(nowS + 400) }))).toBe("rate_limit_exceeded");
    limited = false;
    expect(await replay(first)).toBe("nonce_replay");
    // Two new ones at once: the first takes the nonce, the other finds it taken.
    const [a, b] = await Promise.all(
      [600, 900].map(async (ahead) => app.chat(BODY, { "x-payment-signature": await signedHeader({ nonce: 5n, expiry: BigInt(nowS + ahead) }) })),
    );
    expect([a.status, b.status].sort()).toEqual([200, 401]);
    const [row] = await listSettlements(app.deps.db);
    expect(row).toMatchObject({ nonce: "5", state: "pending", attempts: 0, lastError: null });
    expect(row.expiry).toBe(nowS + (a.status === 200 ? 600 : 900));

    // Dead after the spend was authorized on-chain: the nonce is used there, and stays taken here.
    app.deps.db.$client.run("UPDATE settlements SET state = 'dead', auth_hash = '0x01'");
    expect(await replay(await signedHeader({ nonce: 5n, expiry: BigInt(nowS + 1200) }))).toBe("nonce_replay");
  });

  test("concurrent replays of one nonce let exactly one through", async () => {
    const app = spendAuthApp(config);
    const h = await signedHeader({ nonce: 77n });
    const responses = await Promise.all(Array.from({ length: 50 }, () => app.chat(BODY, { "x-payment-signature": h })));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBe(1);
    expect(statuses.filter((s) => s === 401).length).toBe(49);
    expect((await listSettlements(app.deps.db)).length).toBe(1);
  });

  test("when nothing was served the nonce is released and the same authorization can be retried", async () => {
    const app = spendAuthApp(config);
    const h = await signedHeader({ nonce: 5n });
    mock.behaviour.failWith = 500;
    try {
      const failed = await app.chat(BODY, { "x-payment-signature": h });
      expect(failed.status).toBeGreaterThanOrEqual(500);
    } finally {
      mock.behaviour.failWith = undefined;
    }
    expect((await listSettlements(app.deps.db)).length).toBe(0);
    expect((await app.chat(BODY, { "x-payment-signature": h })).status).toBe(200);
    expect((await listSettlements(app.deps.db)).length).toBe(1);
  });

  test("a streamed answer is claimed as soon as the upstream answers, not when it ends (regression: one that outlasted its authorization was served and never paid)", async () => {
    const app = spendAuthApp(config);
    mock.behaviour.chunkDelayMs = 100;
    try {
      const response = await app.chat({ ...BODY, stream: true }, { "x-payment-signature": await signedHeader({ nonce: 9n }) });
      expect(response.status).toBe(200);
      const reader = response.body!.getReader();
      await reader.read(); // the answer has begun; most of it is still to come
      expect((await listSettlements(app.deps.db)).map((row) => row.nonce)).toEqual(["9"]);
      while (!(await reader.read()).done);
      expect((await listSettlements(app.deps.db)).length).toBe(1);
    } finally {
      mock.behaviour.chunkDelayMs = undefined;
    }
  });

  test("an upstream that has not answered while there is still time to claim the payment is given up, and the nonce goes back (regression: answered after the authorization expired, never paid)", async () => {
    const app = spendAuthApp(config);
    // 32 s of life: 2 s to answer, then 30 s left to claim it on-chain.
    const expiry = BigInt(Math.floor(Date.now() / 1000) + 32);
    mock.behaviour.delayMs = 2_600;
    try {
      const late = await app.chat(BODY, { "x-payment-signature": await signedHeader({ nonce: 11n, expiry }) });
      const error = await errorOf(late);
      expect(error.status).toBe(504);
      expect(error.message).toMatch(/did not answer within [12]000 ms \(the time left to claim the payment before its authorization expires\)$/);
    } finally {
      mock.behaviour.delayMs = undefined;
    }
    expect((await listSettlements(app.deps.db)).length).toBe(0);
    // The upstream was not at fault (the client's expiry was near): nothing counts against it.
    expect(app.deps.registry.upstreams.get("mock")!.consecutiveFailures).toBe(0);
    // The nonce is the client's again: a new authorization for it, with a later expiry, is served.
    expect((await app.chat(BODY, { "x-payment-signature": await signedHeader({ nonce: 11n }) })).status).toBe(200);
  });

  test("a rate-limited request releases its nonce", async () => {
    let allow = false;
    const app = spendAuthApp(config, {
      rateLimit: () =>
        allow ? { "x-ratelimit-limit-requests": "120" } : new GatewayError("rate_limit_exceeded", "slow down", { headers: { "retry-after": "1" } }),
    });
    const h = await signedHeader({ nonce: 6n });
    expect((await app.chat(BODY, { "x-payment-signature": h })).status).toBe(429);
    allow = true;
    const ok = await app.chat(BODY, { "x-payment-signature": h });
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("120");
  });
});

describe("the on-chain balance", () => {
  test("concurrent requests on one commitment never reserve more than its balance (regression: all saw 0 reserved)", async () => {
    // One account read shared by every request, answering later, as the cached reader does.
    let answer!: (account: { spendingKey: string; nonce: bigint; balance: bigint }) => void;
    const read = new Promise<{ spendingKey: string; nonce: bigint; balance: bigint }>((resolve) => (answer = resolve));
    const accounts = { getAccount: () => read as Promise<never> };
    const app = spendAuthApp({ ...config, spend_auth: { ...config.spend_auth, rpc_url: "http://127.0.0.1:9", allowed_signers: [] } }, { accounts });
    const headers = await Promise.all([0n, 1n, 2n, 3n, 4n].map((nonce) => signedHeader({ nonce, amount: 1_000_000n })));
    const responses = Promise.all(headers.map((h) => app.chat(BODY, { "x-payment-signature": h })));
    await Bun.sleep(50);
    answer({ spendingKey: CLIENT.address.toLowerCase(), nonce: 0n, balance: 2_500_000n });
    // Two are served; the rest are refused for the balance, or, once a lower nonce was refused, as
    // nonces the contract could no longer take in order.
    const statuses = (await responses).map((r) => r.status).sort();
    expect(statuses.slice(0, 2)).toEqual([200, 200]);
    expect(statuses.slice(2).every((s) => s === 401 || s === 402)).toBe(true);
    expect(await listSettlements(app.deps.db)).toHaveLength(2);
  });
});

describe("the on-chain account and the rate limit", () => {
  const chainConfig = () => ({ ...config, spend_auth: { ...config.spend_auth, rpc_url: "http://127.0.0.1:9", allowed_signers: [] } });
  const account = (balance: bigint) => ({ getAccount: async () => ({ spendingKey: CLIENT.address.toLowerCase() as `0x${string}`, nonce: 0n, balance }) });

  test("a header signed by someone else does not use up the commitment's limit (regression: forged headers exhausted it)", async () => {
    let taken = 0;
    const app = spendAuthApp(chainConfig(), { accounts: account(10_000_000n), rateLimit: () => (taken++, { "x-ratelimit-limit-requests": "120" }) });
    const forged = await app.chat(BODY, { "x-payment-signature": header(fields(), await sign(fields(), { key: KEYS.stranger })) });
    expect(await errorOf(forged)).toMatchObject({ status: 401, code: "invalid_spend_auth", param: "signature" });
    expect(taken).toBe(0);
    expect((await app.chat(BODY, { "x-payment-signature": await signedHeader() })).status).toBe(200);
    expect(taken).toBe(1);
  });

  test("an authorization that ends undelivered while a later nonce of its commitment is held is settled, not released: the later one could never be claimed otherwise (regression: aborting nonce 0 got 1 and 2 served for nothing)", async () => {
    const app = spendAuthApp(chainConfig(), { accounts: account(10_000_000n) });
    const admit = async (nonce: bigint) => {
      const h = await signedHeader({ nonce });
      const request = new Request("http://localhost/v1/chat/completions", { method: "POST", headers: { "x-payment-signature": h } });
      const text = JSON.stringify(BODY);
      const admitted = await app.hook({
        request,
        clientIp: () => "127.0.0.1",
        requestId: `req_${nonce}`,
        route: app.deps.registry.resolve("paid")!,
        body: JSON.parse(text),
        bodyBytes: text.length,
      });
      if (admitted instanceof GatewayError) throw admitted;
      return admitted;
    };
    const [first, second] = [await admit(0n), await admit(1n)];
    second.settle({ status: 200, usage: { prompt_tokens: 1, completion_tokens: 1 }, upstream: "mock", latencyMs: 1 });
    first.settle({ status: 499, usage: null, upstream: null, latencyMs: 1 }); // the client left before any token
    expect((await listSettlements(app.deps.db)).map((row) => row.nonce).sort()).toEqual(["0", "1"]);
    // Alone, an undelivered one is released as before: the same authorization may be sent again.
    const third = await admit(2n);
    third.settle({ status: 502, usage: null, upstream: null, latencyMs: 1 });
    expect(await listSettlements(app.deps.db)).toHaveLength(2);
    expect(await admit(2n)).toBeDefined();
  });

  test("a replacement of a dead nonce that delivers nothing is given back, not claimed, even while later nonces are held (regression: claimed for nothing)", async () => {
    const app = spendAuthApp(config);
    const nowS = Math.floor(Date.now() / 1000);
    const admit = async (nonce: bigint, expiry: number) => {
      const request = new Request("http://localhost/v1/chat/completions", {
        method: "POST",
        headers: { "x-payment-signature": await signedHeader({ nonce, expiry: BigInt(expiry) }) },
      });
      const text = JSON.stringify(BODY);
      const admitted = await app.hook({
        request,
        clientIp: () => "127.0.0.1",
        requestId: `req_${nonce}`,
        route: app.deps.registry.resolve("paid")!,
        body: JSON.parse(text),
        bodyBytes: text.length,
      });
      if (admitted instanceof GatewayError) throw admitted;
      return admitted;
    };
    const served = { status: 200, usage: { prompt_tokens: 1, completion_tokens: 1 }, upstream: "mock", latencyMs: 1 };
    (await admit(0n, nowS + 300)).settle(served);
    (await admit(1n, nowS + 300)).settle(served); // nonce 1 stays held until the chain takes it
    app.deps.db.$client.run("UPDATE settlements SET state = 'dead' WHERE nonce = '0'");
    (await admit(0n, nowS + 600)).settle({ status: 502, usage: null, upstream: null, latencyMs: 1 });
    expect((await listSettlements(app.deps.db)).find((r) => r.nonce === "0")).toMatchObject({ state: "dead", expiry: nowS + 300 });
    expect(await admit(0n, nowS + 600)).toBeDefined(); // the client may send it again
  });

  test("a refusal for the account's balance carries the rate-limit headers", async () => {
    const app = spendAuthApp(chainConfig(), {
      accounts: account(10n),
      rateLimit: () => ({ "x-ratelimit-limit-requests": "120", "x-ratelimit-remaining-requests": "119" }),
    });
    const refused = await app.chat(BODY, { "x-payment-signature": await signedHeader() });
    expect(refused.status).toBe(402);
    expect(refused.headers.get("x-ratelimit-remaining-requests")).toBe("119");
  });
});

describe("modes", () => {
  test("with neither rpc_url nor allowed_signers the header is refused as disabled", async () => {
    const app = spendAuthApp({ ...config, spend_auth: { ...config.spend_auth, allowed_signers: [] } });
    expect(await errorOf(await app.chat(BODY, { "x-payment-signature": await signedHeader() }))).toMatchObject({ status: 401, code: "spend_auth_disabled" });
  });

  test("an unreachable RPC is a 502, never a pass", async () => {
    const { createAccountReader, createPublic } = await import("../../src/spendauth/chain");
    const rpcUrl = "http://127.0.0.1:9";
    const accounts = createAccountReader(createPublic({ rpcUrl, chainId: CHAIN_ID, contract: CONTRACT, timeoutMs: 2000 }), CONTRACT);
    const app = spendAuthApp({ ...config, spend_auth: { ...config.spend_auth, rpc_url: rpcUrl, allowed_signers: [] } }, { accounts });
    const h = await signedHeader({ nonce: 8n });
    expect(await errorOf(await app.chat(BODY, { "x-payment-signature": h }))).toMatchObject({ status: 502, code: "chain_unavailable" });
    expect((await listSettlements(app.deps.db)).length).toBe(0);
  });
});
