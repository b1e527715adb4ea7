/**
 * What a key policy costs the gate, in isolation: admit() and settle() of a paid request, in
 * process, for a key with no policy and one with every policy set (none binding), interleaved in
 * rounds; prints ns per request of each and their difference, for the fastest round and the median. The client address is
 * what the server would give (a function returning the socket's address), so the socket's own
 * cost (server.requestIP, a getpeername(2) per call) is not in it; `make ab` with AB_POLICY_B=1
 * measures the whole path.
 *
 *   bun bench/key-policy.ts      # KP_ROUNDS (31), KP_BATCH (5000), KP_PART (one part alone:
 *                                # models, budget, perMinute, tokensPerMinute or allowIp)
 */
import { rmSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../src/config/load";
import { openDatabase } from "../src/db/client";
import { buildIdentities } from "../tests/auth/support";
import { createUser } from "../src/auth/users";
import { createApiKey } from "../src/auth/apikey";
import { parsePolicyFlags, type PolicyChange, type PolicyFlags } from "../src/auth/key-policy";
import { grantCredits } from "../src/credits/ledger";
import { ModelRegistry } from "../src/router/registry";
import { clientAddress, trustedProxies } from "../src/client-address";
import type { AdmitInput, Gate } from "../src/auth/types";
import { median } from "./load";

const ROUNDS = Number(process.env.KP_ROUNDS ?? 31);
const BATCH = Number(process.env.KP_BATCH ?? 5_000);
/** Requests settled in one event-loop turn. */
const PER_TURN = 100;

const dir = mkdtempSync(join(tmpdir(), "modelgate-bench-policy-"));
const { config } = buildConfig(
  {
    server: { data_dir: dir },
    limits: { api_key: { per_minute: 1_000_000_000 } },
    upstreams: [{ name: "mock", base_url: "http://127.0.0.1:1/v1" }],
    models: [{ id: "mock-paid", price: { prompt: 1, completion: 2 }, targets: [{ upstream: "mock", model: "mock-small" }] }],
  },
  { env: {} },
);
const opened = openDatabase(dir);
const identities = buildIdentities({ db: opened.db, config, now: Date.now });
const route = new ModelRegistry(config).resolve("mock-paid")!;
const created = await createUser(opened.db, { email: "bench@modelgate.invalid" });
if ("error" in created) throw new Error(created.error);
const userId = created.id;
await grantCredits(opened.db, { userId, micro: 1e15 });
/** Every policy, none binding (bench/ab.ts's AB_POLICY_B=1), or the one part KP_PART names. */
const flags: PolicyFlags = {
  models: "mock-*,other*",
  budget: "1000000/month",
  perMinute: "1000000000",
  tokensPerMinute: "1000000000",
  allowIp: "10.0.0.0/8,127.0.0.0/8",
};
const part = (process.env.KP_PART || undefined) as keyof PolicyFlags | undefined;
const every = parsePolicyFlags(part === undefined ? flags : { [part]: flags[part] });
if ("error" in every) throw new Error(every.error);

const body = { model: "mock-paid", messages: [{ role: "user", content: "Say hello in one short sentence." }] };
const bodyBytes = JSON.stringify(body).length;
const usage = { prompt_tokens: 10, completion_tokens: 8, total_tokens: 18 };
const trusted = trustedProxies([]);

async function keyed(policy: PolicyChange): Promise<Request> {
  const { key } = await createApiKey(opened.db, { userId, name: "bench", policy });
  return new Request("http://127.0.0.1/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${key}` } });
}

/** ns per admit + settle over one batch; the debits' commits (at the end of each turn, as when serving) are not timed. */
async function batch(gate: Gate, request: Request): Promise<number> {
  let ns = 0;
  for (let turnStart = 0; turnStart < BATCH; turnStart += PER_TURN) {
    const started = Bun.nanoseconds();
    for (let i = turnStart; i < turnStart + PER_TURN; i++) {
      const input: AdmitInput = { request, clientIp: () => clientAddress(request, "127.0.0.1", trusted), requestId: `req_${i}`, route, body, bodyBytes };
      const admission = gate.admit(input);
      if (admission instanceof Error || admission instanceof Promise) throw new Error(`not admitted: ${String(admission)}`);
      void admission.settle({ usage, status: 200, upstream: "mock", latencyMs: 1 });
    }
    ns += Bun.nanoseconds() - started;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return ns / BATCH;
}

const requests = { none: await keyed({}), every: await keyed(every) };
const times = { none: [] as number[], every: [] as number[] };
await batch(identities.gate, requests.none);
await batch(identities.gate, requests.every);
for (let round = 0; round < ROUNDS; round++) {
  // Alternate which goes first, so a drift within a round lands on both.
  const order = round % 2 === 0 ? (["none", "every"] as const) : (["every", "none"] as const);
  for (const which of order) times[which].push(await batch(identities.gate, requests[which]));
}
// The fastest round is the one the machine disturbed least: on a shared machine it is the steadier figure.
const line = (pick: (values: number[]) => number): string => {
  const [none, some] = [pick(times.none), pick(times.every)];
  return `no policy ${none.toFixed(0)} ns, policy ${some.toFixed(0)} ns (${some >= none ? "+" : ""}${(some - none).toFixed(0)} ns)`;
};
console.log(`${part ?? "every part"}: admit + settle, ${ROUNDS} rounds of ${BATCH}; fastest: ${line((v) => Math.min(...v))}; median: ${line(median)}`);
await identities.close();
opened.close();
rmSync(dir, { recursive: true, force: true });
process.exit(0);
