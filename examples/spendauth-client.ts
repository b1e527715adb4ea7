/**
 * Paying modelgate per request with a SpendAuth: build and sign an EIP-712 SpendAuthorization with
 * viem, put it in X-Payment-Signature, call the gateway with the official `openai` SDK.
 *
 *   MODELGATE_URL=http://localhost:8080 \
 *   SPENDING_KEY=0x...            # the credit account's spending key (private)
 *   COMMITMENT=0x...              # the credit account's bytes32 commitment
 *   CHAIN_ID=3799 CONTRACT=0x... OPERATOR=0x... SERVICE_ID=1 \
 *   bun examples/spendauth-client.ts "Why is the sky blue?"
 *
 * CHAIN_ID, CONTRACT, OPERATOR and SERVICE_ID are the gateway's [spend_auth] settings. The nonce
 * must be the account's next unused one (the contract settles nonces strictly in order); this
 * example reads it from the chain when RPC_URL is set. When the amount is too low the gateway
 * answers 402 with the amount it needs in `x-payment-required`: this example signs again with it.
 */
import OpenAI from "openai";
import { createPublicClient, http, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`set ${name}`);
  return value;
};

const account = privateKeyToAccount(env("SPENDING_KEY") as `0x${string}`);
const commitment = env("COMMITMENT") as `0x${string}`;
const chainId = Number(env("CHAIN_ID", "3799"));
const contract = env("CONTRACT") as `0x${string}`;
const operator = env("OPERATOR") as `0x${string}`;
const serviceId = BigInt(env("SERVICE_ID", "1"));

async function nextNonce(): Promise<bigint> {
  if (!process.env.RPC_URL) return BigInt(env("NONCE", "0"));
  const client = createPublicClient({ transport: http(process.env.RPC_URL) });
  const view = await client.readContract({
    address: contract,
    abi: parseAbi([
      "struct CreditAccountView { address spendingKey; address token; uint256 balance; uint256 totalFunded; uint256 totalSpent; uint256 nonce; }",
      "function getAccount(bytes32 commitment) view returns (CreditAccountView)",
    ]),
    functionName: "getAccount",
    args: [commitment],
  });
  return view.nonce;
}

/** The X-Payment-Signature value: JSON with every integer as a decimal string. */
async function spendAuthHeader(amount: bigint, nonce: bigint): Promise<string> {
  const message = {
    commitment,
    serviceId,
    jobIndex: 0,
    amount,
    operator,
    nonce,
    expiry: BigInt(Math.floor(Date.now() / 1000) + 300),
  };
  const signature = await account.signTypedData({
    domain: { name: "ShieldedCredits", version: "1", chainId, verifyingContract: contract },
    types: {
      SpendAuthorization: [
        { name: "commitment", type: "bytes32" },
        { name: "serviceId", type: "uint64" },
        { name: "jobIndex", type: "uint8" },
        { name: "amount", type: "uint256" },
        { name: "operator", type: "address" },
        { name: "nonce", type: "uint256" },
        { name: "expiry", type: "uint64" },
      ],
    },
    primaryType: "SpendAuthorization",
    message,
  });
  return JSON.stringify({
    ...message,
    serviceId: message.serviceId.toString(),
    amount: message.amount.toString(),
    nonce: message.nonce.toString(),
    expiry: message.expiry.toString(),
    signature,
  });
}

const client = new OpenAI({ baseURL: `${env("MODELGATE_URL", "http://localhost:8080")}/v1`, apiKey: "not-used-with-spendauth", maxRetries: 0 });
const request = { model: env("MODEL", "llama3.1:8b"), messages: [{ role: "user" as const, content: process.argv[2] ?? "Say hello." }], max_tokens: 256 };
const nonce = await nextNonce();
let amount = BigInt(env("AMOUNT", "1000"));

for (let attempt = 0; attempt < 2; attempt++) {
  try {
    // Per-request headers; `defaultHeaders` on the client works the same way.
    const completion = await client.chat.completions.create(request, { headers: { "X-Payment-Signature": await spendAuthHeader(amount, nonce) } });
    console.log(completion.choices[0]?.message.content);
    break;
  } catch (err) {
    const required = err instanceof OpenAI.APIError && err.status === 402 ? err.headers?.get("x-payment-required") : null;
    if (!required || attempt > 0) throw err;
    console.error(`the gateway asks for ${required} (offered ${amount}); signing again`);
    amount = BigInt(required);
  }
}
