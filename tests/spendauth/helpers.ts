/**
 * Test helpers for SpendAuth: well-known private keys (the local node's default accounts), a
 * signer built on viem's signTypedData, and an in-process app whose Gate sends requests carrying
 * X-Payment-Signature to the SpendAuth hook.
 */
import { privateKeyToAccount } from "viem/accounts";
import { openGate, type Gate } from "../../src/auth/types";
import { createSpendAuth, SPEND_AUTH_HEADER, type SpendAuthDeps } from "../../src/spendauth/admit";
import { SPEND_AUTH_TYPES } from "../../src/spendauth/verify";
import type { SpendAuthorization } from "../../src/spendauth/header";
import { buildTestApp, type TestApp } from "../support/app";

export const KEYS = {
  client: "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  stranger: "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  operator: "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
} as const;

export const CLIENT = privateKeyToAccount(KEYS.client);
export const OPERATOR = privateKeyToAccount(KEYS.operator);
export const CONTRACT = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const CHAIN_ID = 31337;
export const COMMITMENT = `0x${"11".repeat(32)}` as const;

/** The signed message: an authorization without its signature. */
export type AuthFields = Omit<SpendAuthorization, "signature">;

export function fields(overrides: Partial<AuthFields> = {}, nowMs = Date.now()): AuthFields {
  return {
    commitment: COMMITMENT,
    serviceId: 1n,
    jobIndex: 0,
    amount: 1_000_000n,
    operator: OPERATOR.address,
    nonce: 0n,
    expiry: BigInt(Math.floor(nowMs / 1000) + 300),
    ...overrides,
  };
}

export async function sign(message: AuthFields, options: { key?: `0x${string}`; chainId?: number; contract?: `0x${string}` } = {}): Promise<`0x${string}`> {
  const account = privateKeyToAccount(options.key ?? KEYS.client);
  return account.signTypedData({
    domain: { name: "ShieldedCredits", version: "1", chainId: options.chainId ?? CHAIN_ID, verifyingContract: options.contract ?? CONTRACT },
    types: SPEND_AUTH_TYPES,
    primaryType: "SpendAuthorization",
    message,
  });
}

/** The header value: decimal strings for every integer, as the scheme's clients send it. */
export function header(message: AuthFields, signature: string): string {
  return JSON.stringify({
    commitment: message.commitment,
    serviceId: message.serviceId.toString(),
    jobIndex: message.jobIndex,
    amount: message.amount.toString(),
    operator: message.operator,
    nonce: message.nonce.toString(),
    expiry: message.expiry.toString(),
    signature,
  });
}

export async function signedHeader(overrides: Partial<AuthFields> = {}, options: Parameters<typeof sign>[1] = {}): Promise<string> {
  const message = fields(overrides);
  return header(message, await sign(message, options));
}

export const BASE_CONFIG = {
  upstreams: [{ name: "mock", base_url: "http://127.0.0.1:9/v1" }],
  models: [
    { id: "paid", targets: [{ upstream: "mock" }], price: { prompt: 1, completion: 2 } },
    { id: "free", targets: [{ upstream: "mock" }], free: true },
  ],
  spend_auth: { chain_id: CHAIN_ID, verifying_contract: CONTRACT, operator: OPERATOR.address, service_id: 1, allowed_signers: [CLIENT.address] },
};

/** The [spend_auth] table of a binary's config in allowlist mode: CLIENT may sign, no chain. */
export const SPEND_AUTH_TOML = `
[spend_auth]
chain_id = ${CHAIN_ID}
verifying_contract = "${CONTRACT}"
operator = "${OPERATOR.address}"
service_id = 1
allowed_signers = ["${CLIENT.address}"]
`;

/** An in-process app whose gate routes X-Payment-Signature to SpendAuth; everyone else is anonymous. */
export function spendAuthApp(
  raw: Record<string, unknown> = BASE_CONFIG,
  extra: Partial<SpendAuthDeps> = {},
): TestApp & { hook: ReturnType<typeof createSpendAuth> } {
  const holder: { hook?: ReturnType<typeof createSpendAuth> } = {};
  const gate: Gate = {
    admit: (input) => (input.request.headers.has(SPEND_AUTH_HEADER) ? holder.hook!(input) : openGate.admit(input)),
  };
  const app = buildTestApp(raw, { gate });
  holder.hook = createSpendAuth({ db: app.deps.db, config: app.deps.config, now: () => app.deps.now(), ...extra });
  return { ...app, hook: holder.hook };
}
