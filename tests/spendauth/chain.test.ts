/**
 * SpendAuth against a real local EVM node (anvil from the npm registry) with the ShieldedCredits
 * contract compiled by solc-js: the on-chain account check, the settlement worker claiming on-chain,
 * and the per-commitment rate limit under a concurrent burst. In process, so the worker can be
 * stepped; the compiled-binary path is in e2e.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { keccak256, toHex } from "viem";
import { buildTestApp } from "../support/app";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { deployShieldedCredits, startChain, ANVIL_KEYS, type Deployed, type LocalChain } from "../support/chain";
import { openGate, type Gate } from "../../src/auth/types";
import { SPEND_AUTH_HEADER } from "../../src/spendauth/admit";
import { setupSpendAuth, type SpendAuthRuntime } from "../../src/spendauth/setup";
import { listSettlements } from "../../src/spendauth/settlements";
import { spendAuthHash, SHIELDED_CREDITS_ABI } from "../../src/spendauth/abi";
import { createMemoryLimiter } from "../../src/ratelimit/memory";
import { fields, header, sign } from "./helpers";

const OPERATOR = privateKeyToAccount(ANVIL_KEYS[2]);
const BODY = { model: "paid", messages: [{ role: "user", content: "hi" }], max_tokens: 10 };

let chain: LocalChain;
let deployed: Deployed;
let mock: MockUpstream;

beforeAll(async () => {
  mock = startMockUpstream();
  chain = await startChain();
  deployed = await deployShieldedCredits(chain);
}, 60_000);
afterAll(async () => {
  mock.stop();
  await chain.stop();
});

function raw(extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    upstreams: [{ name: "mock", base_url: mock.url }],
    models: [{ id: "paid", targets: [{ upstream: "mock" }], price: { prompt: 1, completion: 1 } }],
    spend_auth: {
      chain_id: chain.chainId,
      verifying_contract: deployed.credits,
      operator: OPERATOR.address,
      service_id: 1,
      rpc_url: chain.rpcUrl,
      operator_key: ANVIL_KEYS[2],
      settle_interval_ms: 3_600_000, // stepped by hand with worker.runOnce()
      account_cache_ms: 0,
      ...extra,
    },
  };
}

async function appWith(runtimeOf: (deps: ReturnType<typeof buildTestApp>["deps"]) => Promise<SpendAuthRuntime>) {
  let runtime: SpendAuthRuntime;
  const gate: Gate = { admit: (input) => (input.request.headers.has(SPEND_AUTH_HEADER) ? runtime.hook(input) : openGate.admit(input)) };
  const app = buildTestApp(raw(), { gate });
  runtime = await runtimeOf(app.deps);
  return { app, runtime: runtime! };
}

async function newAccount(funding: bigint): Promise<{ key: `0x${string}`; commitment: `0x${string}` }> {
  const key = generatePrivateKey();
  const commitment = keccak256(toHex(`commitment:${key}`));
  if (funding > 0n) await deployed.fund(commitment, privateKeyToAccount(key).address, funding);
  return { key, commitment };
}

async function paidHeader(
  account: { key: `0x${string}`; commitment: `0x${string}` },
  nonce: bigint,
  amount = 1_000n,
): Promise<{ value: string; message: ReturnType<typeof fields> }> {
  const message = fields({ commitment: account.commitment, nonce, amount, operator: OPERATOR.address });
  return { value: header(message, await sign(message, { key: account.key, chainId: chain.chainId, contract: deployed.credits })), message };
}

describe("on-chain check and settlement", () => {
  test("a funded account is served, and the worker claims the payment on-chain", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const account = await newAccount(1_000_000n);
    const first = await paidHeader(account, 0n);
    const second = await paidHeader(account, 1n);
    expect((await app.chat(BODY, { "x-payment-signature": first.value })).status).toBe(200);
    expect((await app.chat(BODY, { "x-payment-signature": second.value })).status).toBe(200);
    const before = await deployed.tokenBalance(OPERATOR.address);
    expect(await runtime.worker!.runOnce()).toBe(2);
    expect((await listSettlements(app.deps.db)).map((r) => r.state)).toEqual(["done", "done"]);
    expect(await deployed.tokenBalance(OPERATOR.address)).toBe(before + 2_000n);
    const spend = await chain.client.readContract({
      address: deployed.credits,
      abi: SHIELDED_CREDITS_ABI,
      functionName: "getSpendAuth",
      args: [spendAuthHash(first.message)],
    });
    expect(spend[4]).toBe(true);
    const view = await chain.client.readContract({
      address: deployed.credits,
      abi: SHIELDED_CREDITS_ABI,
      functionName: "getAccount",
      args: [account.commitment],
    });
    expect(view.nonce).toBe(2n);
    expect(view.balance).toBe(998_000n);
    // A nonce the chain has already consumed is refused even though this database never saw it.
    const { app: other } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const stale = await other.chat(BODY, { "x-payment-signature": (await paidHeader(account, 1n)).value });
    expect(((await stale.json()) as { error: { code: string } }).error.code).toBe("nonce_replay");
    await runtime.stop();
  });

  test("a settlement the contract refuses keeps the decoded reason in last_error", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const account = await newAccount(1_000_000n);
    expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 0n)).value })).status).toBe(200);
    // The chain's clock an hour on (undone below): the contract refuses the authorization as expired.
    const snapshot = await chain.client.request({ method: "evm_snapshot" } as never);
    try {
      await chain.client.request({ method: "evm_increaseTime", params: [3_600] } as never);
      await chain.client.request({ method: "evm_mine" } as never);
      expect(await runtime.worker!.runOnce()).toBe(0);
    } finally {
      await chain.client.request({ method: "evm_revert", params: [snapshot] } as never);
    }
    const [row] = await listSettlements(app.deps.db);
    expect(row.state).toBe("pending");
    expect(row.lastError).toContain('"authorizeSpend" reverted');
    expect(row.lastError).toContain("SpendExpired(");
    await runtime.stop();
  });

  test("a nonce ahead of the one the contract can take next is refused: it could never be claimed (regression: nonces 1, 2, 3 of a fresh account were served, never paid)", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const account = await newAccount(1_000_000n);
    const ahead = await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 1n)).value });
    expect(ahead.status).toBe(401);
    expect(((await ahead.json()) as { error: { code: string; param: string; message: string } }).error).toMatchObject({
      code: "invalid_spend_auth",
      param: "nonce",
      message: expect.stringContaining("the next it can take for this account (its on-chain nonce, after this gateway's unsettled authorizations) is 0"),
    });
    // In order, each served one makes room for the next, before any is settled.
    for (const nonce of [0n, 1n, 2n]) expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, nonce)).value })).status).toBe(200);
    expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 4n)).value })).status).toBe(401);
    expect(await runtime.worker!.runOnce()).toBe(3);
    expect((await listSettlements(app.deps.db)).map((r) => r.state)).toEqual(["done", "done", "done"]);
    // After settlement the chain's own nonce is 3: the next one is served.
    expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 3n)).value })).status).toBe(200);
    await runtime.stop();
  });

  test("a nonce whose settlement went dead is signed again, served and claimed, and the later nonce waiting on it is claimed after it (regression: nonce_replay until the dead one expired)", async () => {
    const { app, runtime } = await appWith((deps) =>
      setupSpendAuth({
        config: { ...deps.config, spend_auth: { ...deps.config.spend_auth, settle_max_attempts: 1 } },
        db: deps.db,
        now: deps.now,
        log: () => {},
      }),
    );
    const account = await newAccount(1_000_000n);
    for (const nonce of [0n, 1n]) expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, nonce)).value })).status).toBe(200);
    // The chain's clock an hour on (undone below): nonce 0's claim is refused, and with one attempt allowed it is dead.
    const snapshot = await chain.client.request({ method: "evm_snapshot" } as never);
    try {
      await chain.client.request({ method: "evm_increaseTime", params: [3_600] } as never);
      await chain.client.request({ method: "evm_mine" } as never);
      await runtime.worker!.runOnce();
    } finally {
      await chain.client.request({ method: "evm_revert", params: [snapshot] } as never);
    }
    expect((await listSettlements(app.deps.db)).find((r) => r.nonce === "0")).toMatchObject({ state: "dead", authHash: null });
    // Nonce 1 waits for it, untried (regression: tried, refused by the contract's order, and dead too).
    await runtime.worker!.runOnce();
    expect((await listSettlements(app.deps.db)).find((r) => r.nonce === "1")).toMatchObject({ state: "pending", attempts: 0 });

    const again = fields({
      commitment: account.commitment,
      nonce: 0n,
      amount: 1_000n,
      operator: OPERATOR.address,
      expiry: BigInt(Math.floor(Date.now() / 1000) + 600),
    });
    const signed = header(again, await sign(again, { key: account.key, chainId: chain.chainId, contract: deployed.credits }));
    expect((await app.chat(BODY, { "x-payment-signature": signed })).status).toBe(200);
    for (let i = 0; i < 3 && (await listSettlements(app.deps.db)).some((r) => r.state !== "done"); i++) await runtime.worker!.runOnce();
    expect((await listSettlements(app.deps.db)).map((r) => [r.nonce, r.state, r.expiry]).sort()).toEqual([
      ["0", "done", Number(again.expiry)],
      ["1", "done", expect.any(Number)],
    ]);
    const spend = await chain.client.readContract({
      address: deployed.credits,
      abi: SHIELDED_CREDITS_ABI,
      functionName: "getSpendAuth",
      args: [spendAuthHash(again)],
    });
    expect(spend[4]).toBe(true);
    const view = await chain.client.readContract({
      address: deployed.credits,
      abi: SHIELDED_CREDITS_ABI,
      functionName: "getAccount",
      args: [account.commitment],
    });
    expect(view.nonce).toBe(2n);
    await runtime.stop();
  });

  test("an unfunded commitment is refused", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const response = await app.chat(BODY, { "x-payment-signature": (await paidHeader(await newAccount(0n), 0n)).value });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: "invalid_spend_auth", param: "commitment" });
    await runtime.stop();
  });

  test("a signer that is not the account's spending key is refused", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const account = await newAccount(10_000n);
    const response = await app.chat(BODY, { "x-payment-signature": (await paidHeader({ ...account, key: generatePrivateKey() }, 0n)).value });
    expect(((await response.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: "invalid_spend_auth", param: "signature" });
    await runtime.stop();
  });

  test("authorizations beyond the balance, counting unsettled ones, get 402 insufficient_balance", async () => {
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, log: () => {} }));
    const account = await newAccount(1_500n);
    expect((await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 0n)).value })).status).toBe(200);
    const second = await app.chat(BODY, { "x-payment-signature": (await paidHeader(account, 1n)).value });
    expect(second.status).toBe(402);
    expect(((await second.json()) as { error: { code: string; available: string } }).error).toMatchObject({ code: "insufficient_balance", available: "500" });
    await runtime.stop();
  });
});

describe("rate limit per commitment", () => {
  test("a concurrent burst of 200 authorizations on one commitment lets exactly 120 through", async () => {
    const limiter = createMemoryLimiter({ now: () => 1_000_000 });
    const { app, runtime } = await appWith((deps) => setupSpendAuth({ config: deps.config, db: deps.db, now: deps.now, limiter, log: () => {} }));
    const account = await newAccount(10_000_000n);
    const headers = await Promise.all(Array.from({ length: 200 }, (_, i) => paidHeader(account, BigInt(i), 100n)));
    const responses = await Promise.all(headers.map((h) => app.chat(BODY, { "x-payment-signature": h.value })));
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200).length).toBe(120);
    expect(statuses.filter((s) => s === 429).length).toBe(80);
    const denied = responses.find((r) => r.status === 429)!;
    expect(denied.headers.get("retry-after")).not.toBeNull();
    expect(denied.headers.get("x-ratelimit-limit-requests")).toBe("120");
    // Refused requests did not burn their nonces or queue settlements (written behind: flushed first).
    runtime.settlements.flush();
    expect((await listSettlements(app.deps.db, { limit: 1000 })).length).toBe(120);
    limiter.close();
    await runtime.stop();
  });
});
