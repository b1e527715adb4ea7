/**
 * The chain client: reads credit accounts for the on-chain check (with a short cache that also
 * collapses concurrent reads of one commitment into one RPC call), and, with the operator key,
 * submits settlements. Every RPC failure surfaces as a thrown error; callers turn it into a 502
 * or a retry, never into a pass.
 */
import { createPublicClient, createWalletClient, defineChain, http, type PublicClient, type WalletClient } from "viem";
import { privateKeyToAccount, type PrivateKeyAccount } from "viem/accounts";
import type { SpendAuthorization } from "./header";
import { SHIELDED_CREDITS_ABI } from "./abi";

export interface ChainAccount {
  /** Lower-case address; the zero address when the commitment has no account. */
  spendingKey: `0x${string}`;
  balance: bigint;
  nonce: bigint;
}

export interface AccountReader {
  getAccount(commitment: `0x${string}`): Promise<ChainAccount>;
  /** Drops a kept answer for `commitment` (its balance changed on-chain). */
  forget?(commitment: string): void;
}

interface PendingSpend {
  amount: bigint;
  claimed: boolean;
}

export interface Settler {
  /** The operator address the key controls (lower-case). */
  address: `0x${string}`;
  getSpendAuth(authHash: `0x${string}`): Promise<PendingSpend>;
  /** Submits authorizeSpend and waits for it to be mined; returns the transaction hash. */
  authorizeSpend(auth: SpendAuthorization): Promise<`0x${string}`>;
  /** Submits claimPayment to the operator's own address and waits for it to be mined. */
  claimPayment(authHash: `0x${string}`): Promise<`0x${string}`>;
}

export interface ChainOptions {
  rpcUrl: string;
  chainId: number;
  contract: `0x${string}`;
  timeoutMs: number;
}

export function createPublic(options: ChainOptions): PublicClient {
  return createPublicClient({
    chain: chainOf(options.chainId, options.rpcUrl),
    transport: http(options.rpcUrl, { timeout: options.timeoutMs, retryCount: 0 }),
    pollingInterval: 250,
  }) as PublicClient;
}

export function createAccountReader(client: PublicClient, contract: `0x${string}`): AccountReader {
  return {
    async getAccount(commitment) {
      const view = await client.readContract({ address: contract, abi: SHIELDED_CREDITS_ABI, functionName: "getAccount", args: [commitment] });
      return { spendingKey: view.spendingKey.toLowerCase() as `0x${string}`, balance: view.balance, nonce: view.nonce };
    },
  };
}

/** Reuses an answer for `ttlMs`; concurrent reads of one commitment share one RPC call. */
export function cachedAccountReader(reader: AccountReader, options: { ttlMs: number; now: () => number; maxEntries?: number }): AccountReader {
  const maxEntries = options.maxEntries ?? 10_000;
  const cache = new Map<string, { at: number; value: Promise<ChainAccount> }>();
  return {
    getAccount(commitment) {
      const now = options.now();
      const hit = cache.get(commitment);
      if (hit && now - hit.at <= options.ttlMs) return hit.value;
      if (cache.size >= maxEntries) cache.clear();
      const value = reader.getAccount(commitment);
      cache.set(commitment, { at: now, value });
      // A failed read is never reused: the next request asks the chain again.
      value.catch(() => cache.get(commitment)?.value === value && cache.delete(commitment));
      return value;
    },
    forget(commitment) {
      cache.delete(commitment as `0x${string}`);
    },
  };
}

export function createSettler(client: PublicClient, options: ChainOptions & { operatorKey: string }): Settler {
  const account: PrivateKeyAccount = privateKeyToAccount(normaliseKey(options.operatorKey));
  const wallet: WalletClient = createWalletClient({
    account,
    chain: chainOf(options.chainId, options.rpcUrl),
    transport: http(options.rpcUrl, { timeout: options.timeoutMs, retryCount: 0 }),
  });
  const mined = async (hash: `0x${string}`, what: string): Promise<`0x${string}`> => {
    const receipt = await client.waitForTransactionReceipt({ hash, timeout: options.timeoutMs * 6 });
    if (receipt.status !== "success") throw new Error(`${what} transaction ${hash} reverted`);
    return hash;
  };
  return {
    address: account.address.toLowerCase() as `0x${string}`,
    async getSpendAuth(authHash) {
      const [amount, , , , claimed] = await client.readContract({
        address: options.contract,
        abi: SHIELDED_CREDITS_ABI,
        functionName: "getSpendAuth",
        args: [authHash],
      });
      return { amount, claimed };
    },
    async authorizeSpend(auth) {
      const { request } = await client.simulateContract({
        account,
        address: options.contract,
        abi: SHIELDED_CREDITS_ABI,
        functionName: "authorizeSpend",
        args: [{ ...auth }],
      });
      return mined(await wallet.writeContract(request), "authorizeSpend");
    },
    async claimPayment(authHash) {
      const { request } = await client.simulateContract({
        account,
        address: options.contract,
        abi: SHIELDED_CREDITS_ABI,
        functionName: "claimPayment",
        args: [authHash, account.address],
      });
      return mined(await wallet.writeContract(request), "claimPayment");
    },
  };
}

/** The address an operator key controls, or null when the key is malformed. */
export function operatorKeyAddress(key: string): `0x${string}` | null {
  try {
    return privateKeyToAccount(normaliseKey(key)).address.toLowerCase() as `0x${string}`;
  } catch {
    return null;
  }
}

function normaliseKey(key: string): `0x${string}` {
  const trimmed = key.trim();
  return (trimmed.startsWith("0x") ? trimmed : `0x${trimmed}`) as `0x${string}`;
}

function chainOf(id: number, rpcUrl: string) {
  return defineChain({
    id,
    name: `chain-${id}`,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
}
