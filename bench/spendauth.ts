/**
 * SpendAuth benchmark (part of `make bench`; also runnable alone: `bun bench/spendauth.ts`).
 * The added latency of a SpendAuth request (EIP-712 recovery on, on-chain account check served
 * from the cache, nonce recorded in SQLite, settlement row written) against an API-key request and
 * an anonymous one, through the compiled binary, on one paid and one free model of the mock
 * upstream. Headers are signed before timing starts (a client signs once per request anyway).
 * Requests run one at a time, interleaved in rounds, so the numbers are per-request latency, not
 * throughput. Reported: client-side p50/p99 and the gateway's own x-gateway-overhead-ms.
 * Bounded: N requests per kind (BENCH_SPENDAUTH_N, default 400); loopback only; children stopped.
 */
import { keccak256, toHex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startGateway, type RunningGateway } from "../tests/support/binary";
import { startMockUpstream } from "../tests/support/mock-upstream";
import { deployShieldedCredits, startChain, ANVIL_KEYS } from "../tests/support/chain";
import { SPEND_AUTH_TYPES, recoverSpendSigner, spendDomain } from "../src/spendauth/verify";
import { parseSpendAuthHeader, type SpendAuthorization } from "../src/spendauth/header";
import { benchDir } from "./processes";

const N = Number(process.env.BENCH_SPENDAUTH_N ?? 400);

interface Sample {
  totalMs: number[];
  overheadMs: number[];
}

export async function runSpendAuthBench(options: { mockUrl?: string; pin?: (pid: number) => void } = {}): Promise<string> {
  const ownMock = options.mockUrl ? null : startMockUpstream();
  const mockUrl = options.mockUrl ?? ownMock!.url;
  const chain = await startChain();
  let gateway: RunningGateway | null = null;
  try {
    const deployed = await deployShieldedCredits(chain);
    const operator = privateKeyToAccount(ANVIL_KEYS[2]);
    const key = generatePrivateKey();
    const commitment = keccak256(toHex(`bench:${key}`));
    await deployed.fund(commitment, privateKeyToAccount(key).address, 10n ** 15n);
    gateway = await startGateway(
      `
[limits]
api_key = { per_minute = 1000000000 }
spend_auth = { per_minute = 1000000000 }
anonymous = { per_minute = 1000000000, per_day = 1000000000 }

[[upstreams]]
name = "mock"
base_url = "${mockUrl}"

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 1.0 }

[[models]]
id = "free"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]

[spend_auth]
chain_id = ${chain.chainId}
verifying_contract = "${deployed.credits}"
operator = "${operator.address}"
service_id = 1
rpc_url = "${chain.rpcUrl}"
account_cache_ms = 3600000
`,
      { dir: benchDir("modelgate-bench-") },
    );
    options.pin?.(gateway.proc.pid);
    const apiKey = await createFundedKey(gateway);
    const account = privateKeyToAccount(key);
    const expiry = BigInt(Math.floor(Date.now() / 1000) + 3600);
    const headers: string[] = [];
    for (let i = 0; i < N + 20; i++) {
      const message = { commitment, serviceId: 1n, jobIndex: 0, amount: 100_000n, operator: operator.address, nonce: BigInt(i), expiry };
      const signature = await account.signTypedData({
        domain: { name: "ShieldedCredits", version: "1", chainId: chain.chainId, verifyingContract: deployed.credits },
        types: SPEND_AUTH_TYPES,
        primaryType: "SpendAuthorization",
        message,
      });
      headers.push(JSON.stringify({ ...message, serviceId: "1", amount: "100000", nonce: String(i), expiry: String(expiry), signature }));
    }
    const body = (model: string) => JSON.stringify({ model, messages: [{ role: "user", content: "Say hello in one short sentence." }], max_tokens: 16 });
    const call = async (model: string, extra: Record<string, string>, into: Sample): Promise<void> => {
      const started = performance.now();
      const response = await fetch(`${gateway!.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", ...extra },
        body: body(model),
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`${model} ${JSON.stringify(extra).slice(0, 40)}: status ${response.status}`);
      into.totalMs.push(performance.now() - started);
      into.overheadMs.push(Number(response.headers.get("x-gateway-overhead-ms") ?? NaN));
    };
    const kinds: Record<string, Sample> = { anonymous: empty(), apiKey: empty(), spendAuth: empty() };
    // Nonces are spent in order: the gateway refuses one above the next the contract can take.
    for (let i = 0; i < 20; i++) await call("paid", { "x-payment-signature": headers[i] }, empty()); // warm the account cache
    for (let i = 0; i < N; i++) {
      await call("free", {}, kinds.anonymous);
      if (apiKey) await call("paid", { authorization: `Bearer ${apiKey}` }, kinds.apiKey);
      await call("paid", { "x-payment-signature": headers[20 + i] }, kinds.spendAuth);
    }
    const recovery = await measureRecovery(headers[0], chain.chainId, deployed.credits);
    return report(kinds, { apiKey: apiKey !== null, recoveryUs: recovery });
  } finally {
    await gateway?.stop();
    await chain.stop();
    ownMock?.stop();
  }
}

async function createFundedKey(gateway: RunningGateway): Promise<string | null> {
  const email = "bench-spendauth@modelgate.invalid";
  if ((await gateway.cli(["user", "add", email])).code !== 0) return null;
  const key = await gateway.cli(["key", "create", "--user", email, "--name", "bench"]);
  const token = key.stdout.match(/sk-mg-[A-Za-z0-9_-]+/)?.[0] ?? null;
  if (token && (await gateway.cli(["credits", "grant", "--user", email, "--amount", "1000000"])).code !== 0) return null;
  return token;
}

/** Median microseconds of one EIP-712 recovery in this process (what the gateway does per request). */
async function measureRecovery(headerValue: string, chainId: number, contract: string): Promise<number> {
  const auth = parseSpendAuthHeader(headerValue) as SpendAuthorization;
  const domain = spendDomain(chainId, contract);
  const times: number[] = [];
  for (let i = 0; i < 300; i++) {
    const started = performance.now();
    await recoverSpendSigner(auth, domain);
    times.push((performance.now() - started) * 1000);
  }
  return quantile(times, 0.5);
}

function empty(): Sample {
  return { totalMs: [], overheadMs: [] };
}

function quantile(values: number[], q: number): number {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  return sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] : Number.NaN;
}

function report(kinds: Record<string, Sample>, facts: { apiKey: boolean; recoveryUs: number }): string {
  const base = facts.apiKey ? kinds.apiKey : kinds.anonymous;
  const row = (name: string, s: Sample): string => {
    const p50 = quantile(s.totalMs, 0.5);
    const added = quantile(s.overheadMs, 0.5) - quantile(base.overheadMs, 0.5);
    return `| ${name} | ${s.totalMs.length} | ${p50.toFixed(3)} | ${quantile(s.totalMs, 0.99).toFixed(3)} | ${quantile(s.overheadMs, 0.5).toFixed(3)} | ${s === base ? "baseline" : `${added >= 0 ? "+" : ""}${added.toFixed(3)}`} |`;
  };
  const lines = [
    "### SpendAuth: added latency per request",
    "",
    `Sequential requests through the compiled binary to the mock upstream, interleaved; SpendAuth with EIP-712 recovery, the on-chain account check cached, replay record and settlement row in SQLite. Baseline: ${facts.apiKey ? "an API-key request on the same paid model" : "an anonymous request (the API-key path was not available)"}.`,
    "",
    "| request | n | p50 ms | p99 ms | gateway overhead p50 ms | added vs baseline (overhead p50) ms |",
    "|---|---:|---:|---:|---:|---:|",
    row("anonymous (free model)", kinds.anonymous),
  ];
  if (facts.apiKey) lines.push(row("API key (paid model)", kinds.apiKey));
  lines.push(row("SpendAuth (paid model)", kinds.spendAuth));
  lines.push("", `One EIP-712 signer recovery (viem, in process): ${facts.recoveryUs.toFixed(0)} µs median.`);
  return lines.join("\n");
}

if (import.meta.main) console.log(await runSpendAuthBench());
