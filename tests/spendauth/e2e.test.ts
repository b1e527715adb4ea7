/**
 * End to end through the compiled binary: a local anvil node with ShieldedCredits (solc-js) and a
 * funded account; the official `openai` SDK pays with X-Payment-Signature; an unfunded commitment
 * is refused; the gateway's settlement worker claims the payment, observed on-chain, in
 * /api/status and in `modelgate settlements list`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { keccak256, toHex } from "viem";
import { startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { deployShieldedCredits, startChain, ANVIL_KEYS, type Deployed, type LocalChain } from "../support/chain";
import { spendAuthHash, SHIELDED_CREDITS_ABI } from "../../src/spendauth/abi";
import { fields, header, sign } from "./helpers";

const OPERATOR = privateKeyToAccount(ANVIL_KEYS[2]);

let chain: LocalChain;
let deployed: Deployed;
let mock: MockUpstream;
let gateway: RunningGateway;

beforeAll(async () => {
  mock = startMockUpstream();
  chain = await startChain();
  deployed = await deployShieldedCredits(chain);
  gateway = await startGateway(
    `
[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }

[spend_auth]
chain_id = ${chain.chainId}
verifying_contract = "${deployed.credits}"
operator = "${OPERATOR.address}"
service_id = 7
rpc_url = "${chain.rpcUrl}"
operator_key = "env:OPERATOR_PRIVATE_KEY"
settle_interval_ms = 50
`,
    { env: { OPERATOR_PRIVATE_KEY: ANVIL_KEYS[2] } },
  );
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  mock.stop();
  await chain.stop();
});

async function account(funding: bigint): Promise<{ key: `0x${string}`; commitment: `0x${string}` }> {
  const key = generatePrivateKey();
  const commitment = keccak256(toHex(`e2e:${key}`));
  if (funding > 0n) await deployed.fund(commitment, privateKeyToAccount(key).address, funding);
  return { key, commitment };
}

async function authorize(who: { key: `0x${string}`; commitment: `0x${string}` }, nonce: bigint, amount: bigint) {
  const message = fields({ commitment: who.commitment, serviceId: 7n, nonce, amount, operator: OPERATOR.address });
  const signature = await sign(message, { key: who.key, chainId: chain.chainId, contract: deployed.credits });
  return { message, value: header(message, signature) };
}

describe("SpendAuth through the compiled binary and a local chain", () => {
  test("a paid request is served to the openai SDK and settled on-chain", async () => {
    const payer = await account(10_000_000n);
    const auth = await authorize(payer, 0n, 5_000n);
    const client = new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: "unused", defaultHeaders: { "X-Payment-Signature": auth.value }, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 50 });
    expect(completion.choices[0].message.content).toBe("Hello from the mock upstream.");

    const authHash = spendAuthHash(auth.message);
    const deadline = Date.now() + 20_000;
    let claimed = false;
    while (!claimed && Date.now() < deadline) {
      const spend = await chain.client.readContract({ address: deployed.credits, abi: SHIELDED_CREDITS_ABI, functionName: "getSpendAuth", args: [authHash] });
      claimed = spend[4];
      if (!claimed) await Bun.sleep(50);
    }
    expect(claimed).toBe(true);
    expect(await deployed.tokenBalance(OPERATOR.address)).toBe(5_000n);

    // The claim is mined before the worker reads its receipt and marks the row done.
    type Status = { spend_auth: { mode: string; settling: boolean; settlements: Record<string, number> } };
    let status = (await (await fetch(`${gateway.url}/api/status`)).json()) as Status;
    while (!(status.spend_auth.settlements.done >= 1) && Date.now() < deadline) {
      await Bun.sleep(50);
      status = (await (await fetch(`${gateway.url}/api/status`)).json()) as Status;
    }
    expect(status.spend_auth).toMatchObject({ mode: "chain", settling: true });
    expect(status.spend_auth.settlements.done).toBeGreaterThanOrEqual(1);
    const listed = await gateway.cli(["settlements", "list", "--state", "done"]);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toContain(payer.commitment.slice(0, 10));
    expect(listed.stdout).toContain("5000");

    // The same authorization again is a replay, also through the SDK's per-request headers.
    const replay = await client.chat.completions
      .create({ model: "paid", messages: [{ role: "user", content: "again" }], max_tokens: 50 }, { headers: { "X-Payment-Signature": auth.value } })
      .catch((err: unknown) => err as InstanceType<typeof OpenAI.APIError>);
    expect(replay).toBeInstanceOf(OpenAI.APIError);
    expect((replay as InstanceType<typeof OpenAI.APIError>).status).toBe(401);
    expect((replay as InstanceType<typeof OpenAI.APIError>).code).toBe("nonce_replay");
  });

  test("an unfunded commitment is refused and nothing is queued", async () => {
    const payer = await account(0n);
    const auth = await authorize(payer, 0n, 5_000n);
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment-signature": auth.value },
      body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 50 }),
    });
    expect(response.status).toBe(401);
    expect(((await response.json()) as { error: { code: string; param: string } }).error).toMatchObject({ code: "invalid_spend_auth", param: "commitment" });
    const listed = await gateway.cli(["settlements", "list", "--json"]);
    expect((JSON.parse(listed.stdout) as Array<{ commitment: string }>).some((r) => r.commitment === payer.commitment)).toBe(false);
  });

  test("an amount below the price gets 402 with what to sign", async () => {
    const payer = await account(10_000_000n);
    const auth = await authorize(payer, 0n, 1n);
    const response = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment-signature": auth.value },
      body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 50 }),
    });
    expect(response.status).toBe(402);
    expect(response.headers.get("x-payment-required-service-id")).toBe("7");
    const required = BigInt(response.headers.get("x-payment-required")!);
    const paid = await authorize(payer, 0n, required);
    const retry = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-payment-signature": paid.value },
      body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }], max_tokens: 50 }),
    });
    expect(retry.status).toBe(200);
  });

  test("examples/spendauth-client.ts pays, re-signing after the 402", async () => {
    const payer = await account(10_000_000n);
    const child = Bun.spawn([process.execPath, "examples/spendauth-client.ts", "hello"], {
      cwd: `${import.meta.dir}/../..`,
      env: {
        ...process.env,
        MODELGATE_URL: gateway.url,
        SPENDING_KEY: payer.key,
        COMMITMENT: payer.commitment,
        CHAIN_ID: String(chain.chainId),
        CONTRACT: deployed.credits,
        OPERATOR: OPERATOR.address,
        SERVICE_ID: "7",
        RPC_URL: chain.rpcUrl,
        MODEL: "paid",
        AMOUNT: "1",
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
    expect(stderr).toContain("signing again");
    expect(stdout.trim()).toBe("Hello from the mock upstream.");
    expect(code).toBe(0);
  });
});
