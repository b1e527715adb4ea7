/**
 * Kill -9 of the compiled binary under mixed load, five rounds on one data directory: chat paid
 * by API key (JSON and stream), chat paid by SpendAuth headers (allowlist mode, a fresh nonce
 * each) and signed webhook POSTs run at once, and the process is killed once every kind has
 * answers in the round. Nothing a client was told is lost or given twice: every chat answer
 * received in full is in the ledger, every SpendAuth header answered 200 has its settlement row
 * and is a replay after the restart, every webhook answered 202 is in the outbox exactly once.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { HELLO, HELLO_COST, modelsToml } from "../auth/support";
import { SPEND_AUTH_TOML, COMMITMENT, signedHeader } from "../spendauth/helpers";
import { createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { ledgerTotals, paidChat, payWithHeader } from "../support/paid-load";
import { outboxBodies, sendWebhook, webhooksToml } from "../support/webhook-binary";

const upstream = startMockUpstream();
const started: RunningGateway[] = [];
afterAll(async () => {
  for (const gw of started) if (gw.proc.exitCode === null) await gw.stop("SIGKILL");
  upstream.stop();
});

const ROUNDS = 5;
/** Concurrent clients of each kind: modest, for a shared 2-core machine. */
const LANES = { chat: 4, spendAuth: 2, webhook: 2 } as const;
/** The kill comes once every kind has this many answers in the round: all are under way. */
const KILL_AFTER = { chat: 30, spendAuth: 10, webhook: 10 } as const;
type Kind = keyof typeof LANES;
/** HELLO with a bound on its answer, so the authorized amount covers its maximum cost. */
const SPEND_BODY = { ...HELLO, max_tokens: 20 };
const SPEND_AMOUNT = 10_000_000n;

interface Served {
  value: string;
  nonce: string;
}

/** What the clients of one round were told, and what was still open at the kill. */
interface RoundResult {
  /** Chat answers received in full. */
  whole: number;
  /** Chat requests sent and not yet answered when the kill was sent. */
  chatInFlight: number;
  /** SpendAuth headers answered 200. */
  served: Served[];
  /** SpendAuth requests sent and not yet answered when the kill was sent. */
  spendInFlight: number;
  /** call_id to body, for each webhook answered 202. */
  acked: Map<number, string>;
}

async function start(dir: string): Promise<{ gw: RunningGateway; hooks: string }> {
  const hooksPort = freePort();
  const config = `${modelsToml(upstream.url)}
[limits]
api_key = { per_minute = 100000 }
spend_auth = { per_minute = 100000 }
${SPEND_AUTH_TOML}
${webhooksToml(hooksPort)}`;
  const gw = await startGateway(config, { dir });
  started.push(gw);
  const hooks = `http://127.0.0.1:${hooksPort}`;
  expect(await (await fetch(`${hooks}/webhooks/health`)).text()).toBe("ok");
  return { gw, hooks };
}

/** The webhook's call_id, or null when the connection died first; throws on any status but 202. */
async function acknowledged(hooks: string, body: string): Promise<number | null> {
  let response: Response;
  try {
    response = await sendWebhook(hooks, body);
  } catch {
    return null;
  }
  if (response.status !== 202) throw new Error(`webhook status ${response.status}: ${await response.text()}`);
  try {
    return ((await response.json()) as { call_id: number }).call_id;
  } catch {
    return null;
  }
}

/** Runs every lane until the kill, which it sends itself once each kind has KILL_AFTER answers. */
async function loadUntilKilled(gw: RunningGateway, options: { hooks: string; key: string; round: number; nextNonce: () => bigint }): Promise<RoundResult> {
  const result: RoundResult = { whole: 0, chatInFlight: 0, served: [], spendInFlight: 0, acked: new Map() };
  const answers: Record<Kind, number> = { chat: 0, spendAuth: 0, webhook: 0 };
  const open = { chat: 0, spendAuth: 0 };
  let killed = false;
  const answered = (kind: Kind): void => {
    answers[kind] += 1;
    if (killed || !(Object.keys(LANES) as Kind[]).every((k) => answers[k] >= KILL_AFTER[k])) return;
    killed = true;
    result.chatInFlight = open.chat;
    result.spendInFlight = open.spendAuth;
    gw.proc.kill("SIGKILL");
  };
  // Before the kill, every request must be answered in full: a loss there is a failure, not the crash.
  const cutOff = (what: string): void => {
    if (!killed) throw new Error(`${what} was cut off before the kill`);
  };
  const chat = async (lane: number): Promise<void> => {
    for (let i = 0; !killed; i++) {
      open.chat += 1;
      const whole = await paidChat(gw, { key: options.key, body: HELLO, stream: (lane + i) % 2 === 0 });
      open.chat -= 1;
      if (!whole) cutOff("a chat answer");
      else {
        result.whole += 1;
        answered("chat");
      }
    }
  };
  const spendAuth = async (): Promise<void> => {
    while (!killed) {
      const nonce = options.nextNonce();
      const value = await signedHeader({ nonce, amount: SPEND_AMOUNT });
      open.spendAuth += 1;
      const answer = await payWithHeader(gw, { value, body: SPEND_BODY });
      open.spendAuth -= 1;
      if (answer === null) cutOff("a SpendAuth answer");
      else if (answer.status !== 200) {
        // The nonce's write waits at most 20 ms for a lock another connection holds (the
        // outbox's commit); then it is a 503 that serves nothing and that a client sends again.
        expect(answer).toEqual({ status: 503, code: "service_unavailable" });
      } else {
        result.served.push({ value, nonce: nonce.toString() });
        answered("spendAuth");
      }
    }
  };
  const webhook = async (lane: number): Promise<void> => {
    for (let i = 0; !killed; i++) {
      const body = JSON.stringify({ round: options.round, lane, i, id: crypto.randomUUID() });
      const callId = await acknowledged(options.hooks, body);
      if (callId === null) cutOff("a webhook's 202");
      else {
        result.acked.set(callId, body);
        answered("webhook");
      }
    }
  };
  const lanes = (count: number, run: (lane: number) => Promise<void>): Array<Promise<void>> => Array.from({ length: count }, (_, lane) => run(lane));
  await Promise.all([...lanes(LANES.chat, chat), ...lanes(LANES.spendAuth, spendAuth), ...lanes(LANES.webhook, webhook)]);
  await gw.proc.exited;
  return result;
}

/** The nonces of the test's commitment in the settlement queue, read with the process gone. */
function settledNonces(dataDir: string): string[] {
  const db = new Database(join(dataDir, "modelgate.db"));
  try {
    return db
      .query<{ nonce: string }, [string]>("SELECT nonce FROM settlements WHERE commitment = ?")
      .all(COMMITMENT)
      .map((row) => row.nonce);
  } finally {
    db.close();
  }
}

async function expectReplays(gw: RunningGateway, served: Served[]): Promise<void> {
  const answers = await Promise.all(served.map(({ value }) => payWithHeader(gw, { value, body: SPEND_BODY })));
  for (const answer of answers) expect(answer).toEqual({ status: 401, code: "nonce_replay" });
}

describe("kill -9 under paid chat, SpendAuth and webhook load", () => {
  test(`in ${ROUNDS} rounds, nothing a client was told is lost or served twice`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-crash-mixed-"));
    const dataDir = join(dir, "data");
    let issued = 0n;
    const nextNonce = (): bigint => issued++;
    let whole = 0;
    let chatInFlight = 0;
    let spendInFlight = 0;
    const served: Served[] = [];
    const acked = new Map<number, string>();
    let previous: Served[] = [];
    let key = "";
    for (let round = 0; round < ROUNDS; round++) {
      const { gw, hooks } = await start(dir);
      if (round === 0) key = (await createUserKey(gw, { credits: "1000" })).key;
      await expectReplays(gw, previous);
      const result = await loadUntilKilled(gw, { hooks, key, round, nextNonce });
      whole += result.whole;
      chatInFlight += result.chatInFlight;
      spendInFlight += result.spendInFlight;
      served.push(...result.served);
      for (const [callId, body] of result.acked) acked.set(callId, body);
      previous = result.served;

      // (a) every chat answer received in full is debited; at most the ones in flight besides
      const ledger = ledgerTotals(dataDir);
      expect(ledger.balance).toBe(ledger.sum);
      expect(ledger.debited % HELLO_COST).toBe(0);
      expect(ledger.debited / HELLO_COST).toBeGreaterThanOrEqual(whole);
      expect(ledger.debited / HELLO_COST).toBeLessThanOrEqual(whole + chatInFlight);

      // (b) every served header is queued for settlement; of the unanswered, at most those in flight
      const settled = settledNonces(dataDir);
      const queued = new Set(settled);
      expect(served.map(({ nonce }) => nonce).filter((nonce) => !queued.has(nonce))).toEqual([]);
      expect(settled.length).toBeLessThanOrEqual(served.length + spendInFlight);

      // (c) every acknowledged webhook is in the outbox with its body, and no body twice
      const outbox = await outboxBodies({ dir, databaseUrl: null });
      const bodies = [...outbox.values()];
      expect(new Set(bodies).size).toBe(bodies.length);
      const lost = [...acked].filter(([callId, body]) => outbox.get(callId) !== body);
      expect(lost).toEqual([]);
    }
    const { gw } = await start(dir);
    await expectReplays(gw, previous);
    await gw.stop("SIGKILL");
  }, 60_000);
});
