/**
 * A triage job's model call alone (part of bench/triage.ts; also alone: `bun bench/triage-call.ts`):
 * the same prompt, N times, through src/router/in-process.ts's createModelCaller (as_user), and
 * through the app's own handler with that user's API key, both in this process over the same app
 * and the same mock model (a process of its own, so its CPU is not counted). Prints the CPU each
 * call costs this process (process.cpuUsage; the best of three alternated rounds), side by side: the in-process call must cost
 * no more than the keyed one.
 */
import { composeTestApp } from "../tests/support/app";
import { buildIdentities } from "../tests/auth/support";
import { createUser } from "../src/auth/users";
import { createApiKey } from "../src/auth/apikey";
import { createModelCaller } from "../src/router/in-process";
import { freePort } from "../tests/support/binary";
import { startMock } from "./processes";

const CALLS = Number(process.env.BENCH_TRIAGE_CALLS ?? 2000);
const WARMUP = 200;
const ROUNDS = 3;
const CONCURRENCY = 8;
const PROMPT = "x".repeat(600);
const AS_USER = "bench@example.com";

async function inParallel(count: number, run: () => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next++ < count) await run();
    }),
  );
}

/** CPU µs per call of `run`, over CALLS calls after WARMUP. */
async function cpuPerCall(run: () => Promise<void>): Promise<number> {
  await inParallel(WARMUP, run);
  Bun.gc(true);
  const before = process.cpuUsage();
  await inParallel(CALLS, run);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / CALLS;
}

export interface ModelCallCost {
  inProcessUs: number;
  withKeyUs: number;
}

export async function measureModelCall(): Promise<ModelCallCost> {
  const mock = await startMock(freePort(), null);
  const unlimited = { per_minute: 100_000_000 };
  const composed = composeTestApp(
    {
      upstreams: [{ name: "mock", base_url: mock.url }],
      models: [{ id: "triage-model", targets: [{ upstream: "mock", model: "mock-small" }], free: true }],
      limits: { session: unlimited, api_key: unlimited },
    },
    { identities: buildIdentities },
  );
  try {
    const { app, deps } = composed;
    const user = await createUser(deps.db, { email: AS_USER });
    if ("error" in user) throw new Error(user.error);
    const { key } = await createApiKey(deps.db, { userId: user.id, name: "bench", now: Date.now() });
    const callModel = createModelCaller(() => deps);
    const body = JSON.stringify({ model: "triage-model", messages: [{ role: "user", content: PROMPT }], max_tokens: 400, stream: false });
    const inProcess = async (): Promise<void> => {
      const answer = await callModel({ model: "triage-model", prompt: PROMPT, maxTokens: 400, asUser: AS_USER, timeoutMs: 10_000 });
      if (!answer.ok) throw new Error(answer.error);
    };
    const withKey = async (): Promise<void> => {
      const response = await app.handle(
        new Request("http://localhost/v1/chat/completions", {
          method: "POST",
          body,
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        }),
      );
      if (!response.ok) throw new Error(`chat answered ${response.status}`);
      await response.text();
    };
    // Alternated, each the better of its rounds: neither gains from running second on a warmer JIT.
    const costs = { inProcessUs: Infinity, withKeyUs: Infinity };
    for (let round = 0; round < ROUNDS; round++) {
      costs.inProcessUs = Math.min(costs.inProcessUs, await cpuPerCall(inProcess));
      costs.withKeyUs = Math.min(costs.withKeyUs, await cpuPerCall(withKey));
    }
    return costs;
  } finally {
    composed.identities?.close();
    composed.closeDb();
    mock.proc.kill();
  }
}

if (import.meta.main) {
  const cost = await measureModelCall();
  console.log(`in-process (as_user): ${cost.inProcessUs.toFixed(0)} µs CPU per call; with a key (app.handle): ${cost.withKeyUs.toFixed(0)} µs`);
}
