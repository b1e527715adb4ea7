/**
 * A real local EVM node for the SpendAuth tests: Foundry's anvil, installed from the npm registry
 * (@foundry-rs/anvil ships the binary in a per-platform package), started on a free loopback port
 * and stopped by the test. The contracts in contracts/ are compiled with solc-js (npm `solc`) at
 * test time and deployed with viem.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { createPublicClient, createWalletClient, defineChain, http, type Abi, type PublicClient } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { freePort } from "./binary";

const require = createRequire(import.meta.url);
const CONTRACTS_DIR = resolve(import.meta.dir, "../../contracts");

/** anvil's well-known development accounts (deterministic from its default mnemonic). */
export const ANVIL_KEYS = [
  "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80",
  "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d",
  "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a",
] as const;

export interface LocalChain {
  rpcUrl: string;
  chainId: number;
  client: PublicClient;
  stop(): Promise<void>;
}

function anvilBinary(): string {
  const arch = process.arch === "x64" ? "amd64" : process.arch;
  const platformPackage = `@foundry-rs/anvil-${process.platform}-${arch}`;
  return join(dirname(require.resolve(`${platformPackage}/package.json`)), "bin", "anvil");
}

export async function startChain(options: { chainId?: number } = {}): Promise<LocalChain> {
  const chainId = options.chainId ?? 31337;
  const port = freePort();
  const proc: Subprocess = Bun.spawn([anvilBinary(), "--host", "127.0.0.1", "--port", String(port), "--chain-id", String(chainId), "--silent"], {
    stdout: "ignore",
    stderr: "pipe",
    stdin: "ignore",
  });
  const rpcUrl = `http://127.0.0.1:${port}`;
  const chain = defineChain({
    id: chainId,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createPublicClient({ chain, transport: http(rpcUrl, { retryCount: 0 }), pollingInterval: 50 }) as PublicClient;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`anvil exited with ${proc.exitCode}`);
    try {
      if ((await client.getChainId()) === chainId) break;
    } catch {}
    if (Date.now() > deadline) throw new Error("anvil did not start");
    await Bun.sleep(25);
  }
  return {
    rpcUrl,
    chainId,
    client,
    stop: async () => {
      proc.kill();
      await proc.exited;
    },
  };
}

interface CompiledContract {
  abi: Abi;
  bytecode: `0x${string}`;
}

/** Compiles every .sol file named with solc-js; throws with the compiler's messages on error. */
function compileContracts(files: string[]): Record<string, CompiledContract> {
  const solc = require("solc") as { compile(input: string): string };
  const sources = Object.fromEntries(files.map((file) => [file, { content: readFileSync(join(CONTRACTS_DIR, file), "utf8") }]));
  const input = {
    language: "Solidity",
    sources,
    settings: { optimizer: { enabled: true, runs: 200 }, outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input))) as {
    errors?: Array<{ severity: string; formattedMessage: string }>;
    contracts: Record<string, Record<string, { abi: Abi; evm: { bytecode: { object: string } } }>>;
  };
  const errors = (output.errors ?? []).filter((e) => e.severity === "error");
  if (errors.length) throw new Error(errors.map((e) => e.formattedMessage).join("\n"));
  const compiled: Record<string, CompiledContract> = {};
  for (const contracts of Object.values(output.contracts)) {
    for (const [name, contract] of Object.entries(contracts)) {
      compiled[name] = { abi: contract.abi, bytecode: `0x${contract.evm.bytecode.object}` };
    }
  }
  return compiled;
}

export interface Deployed {
  credits: `0x${string}`;
  token: `0x${string}`;
  compiled: Record<string, CompiledContract>;
  /** Mints `amount` tokens to the funder and funds `commitment` with `spendingKey`. */
  fund(commitment: `0x${string}`, spendingKey: `0x${string}`, amount: bigint): Promise<void>;
  tokenBalance(address: `0x${string}`): Promise<bigint>;
}

export async function deployShieldedCredits(chain: LocalChain, deployerKey: `0x${string}` = ANVIL_KEYS[0]): Promise<Deployed> {
  const compiled = compileContracts(["ShieldedCredits.sol", "TestToken.sol"]);
  const account = privateKeyToAccount(deployerKey);
  const wallet = createWalletClient({ account, chain: chain.client.chain, transport: http(chain.rpcUrl, { retryCount: 0 }) });
  const deploy = async (name: string): Promise<`0x${string}`> => {
    const hash = await wallet.deployContract({ abi: compiled[name].abi, bytecode: compiled[name].bytecode, args: [] } as unknown as Parameters<
      typeof wallet.deployContract
    >[0]);
    const receipt = await chain.client.waitForTransactionReceipt({ hash });
    if (!receipt.contractAddress) throw new Error(`deploying ${name} failed`);
    return receipt.contractAddress;
  };
  const credits = await deploy("ShieldedCredits");
  const token = await deploy("TestToken");
  const send = async (address: `0x${string}`, abi: Abi, functionName: string, args: unknown[]): Promise<void> => {
    const hash = await wallet.writeContract({ address, abi, functionName, args } as unknown as Parameters<typeof wallet.writeContract>[0]);
    const receipt = await chain.client.waitForTransactionReceipt({ hash });
    if (receipt.status !== "success") throw new Error(`${functionName} reverted`);
  };
  return {
    credits,
    token,
    compiled,
    fund: async (commitment, spendingKey, amount) => {
      await send(token, compiled.TestToken.abi, "mint", [account.address, amount]);
      await send(token, compiled.TestToken.abi, "approve", [credits, amount]);
      await send(credits, compiled.ShieldedCredits.abi, "fundCredits", [token, amount, commitment, spendingKey]);
    },
    tokenBalance: async (address) =>
      (await chain.client.readContract({ address: token, abi: compiled.TestToken.abi, functionName: "balanceOf", args: [address] })) as bigint,
  };
}
