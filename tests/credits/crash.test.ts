/**
 * A crash under paid load, against the compiled binary: `kill -9` while requests are in flight,
 * several rounds on one database. Every answer a client received in full was debited before it
 * left, so after each crash the ledger holds at least the cost of every completed answer, and at
 * most that plus the requests still in flight at the kill (debited, then killed before their last
 * byte went out). Regression: debits were written 250 ms behind, and a crash lost them (176 of
 * 4,218 charged answers in one run).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { ledgerTotals, paidChat } from "../support/paid-load";
import { HELLO, HELLO_COST, modelsToml } from "../auth/support";

const upstream = startMockUpstream();
const started: RunningGateway[] = [];
afterAll(async () => {
  for (const gw of started) if (gw.proc.exitCode === null) await gw.stop("SIGKILL");
  upstream.stop();
});

/** The models, and a rate limit the load stays under. */
const CONFIG = `${modelsToml(upstream.url)}\n[limits]\napi_key = { per_minute = 100000 }\n`;
const ROUNDS = 5;
const CONCURRENCY = 12;
/** Answers completed in a round before the kill: the load is well under way. */
const KILL_AFTER = 150;

describe("kill -9 under paid load", () => {
  test(`in ${ROUNDS} rounds, every answer a client received in full is in the ledger after the crash`, async () => {
    let gw = await startGateway(CONFIG);
    started.push(gw);
    const { key } = await createUserKey(gw, { credits: "1000" });
    const dataDir = join(gw.dir, "data");
    let completed = 0;
    let inFlightAtKill = 0;
    for (let round = 0; round < ROUNDS; round++) {
      if (round > 0) {
        gw = await startGateway(CONFIG, { dir: gw.dir });
        started.push(gw);
      }
      let completedThisRound = 0;
      let inFlight = 0;
      let killed = false;
      const worker = async (lane: number): Promise<void> => {
        for (let i = 0; !killed; i++) {
          inFlight += 1;
          const whole = await paidChat(gw, { key, body: HELLO, stream: (lane + i) % 2 === 0 });
          inFlight -= 1;
          if (whole) completed += 1;
          if (whole && ++completedThisRound === KILL_AFTER && !killed) {
            killed = true;
            inFlightAtKill += inFlight;
            gw.proc.kill("SIGKILL");
          }
        }
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, (_, lane) => worker(lane)));
      await gw.proc.exited;
      const after = ledgerTotals(dataDir);
      expect(after.balance).toBe(after.sum);
      expect(after.debited % HELLO_COST).toBe(0);
      const requests = after.debited / HELLO_COST;
      expect(requests).toBeGreaterThanOrEqual(completed);
      expect(requests).toBeLessThanOrEqual(completed + inFlightAtKill);
    }
  }, 60_000);
});
