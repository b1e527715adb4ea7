/**
 * SpendAuth where replicas share one database, each replica a handle of its own: on SQLite (two
 * connections to one file) and on a real Postgres (two pools). A nonce recorded through one is a
 * replay through the other, and of the same nonce recorded through both at once exactly one
 * wins; served authorizations are written in one statement per turn and claimed by the worker;
 * of two workers only the lease's holder settles, and the other takes over once it stops.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { openDatabase, type Db } from "../../src/db/client";
import { createLease } from "../../src/db/lease";
import { keepLease } from "../../src/db/lease-keeper";
import { openStorage, type OpenedStorage } from "../../src/db/open";
import type { Settler } from "../../src/spendauth/chain";
import { parseSpendAuthHeader, type SpendAuthorization } from "../../src/spendauth/header";
import { createNonceStore } from "../../src/spendauth/nonces";
import { Reservations } from "../../src/spendauth/reservations";
import { createSettlementWriter } from "../../src/spendauth/settlement-writer";
import { listSettlements, readySettlements, settlementCounts } from "../../src/spendauth/settlements";
import { startSettlementWorker } from "../../src/spendauth/worker";
import { startPostgres, type RunningPostgres } from "../support/postgres";
import { COMMITMENT, signedHeader } from "./helpers";

let pg: RunningPostgres;
const closers: Array<() => Promise<void> | void> = [];
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  for (const close of closers) await close();
  await pg?.stop();
});

let databases = 0;
/** Two handles on one fresh database of the engine, as two replicas have. */
const engines: Array<[string, () => Promise<[Db, Db]>]> = [
  [
    "sqlite",
    async () => {
      const dir = mkdtempSync(`${tmpdir()}/modelgate-shared-`);
      const [a, b] = [openDatabase(dir), openDatabase(dir)];
      closers.push(a.close, b.close);
      return [a.db, b.db];
    },
  ],
  [
    "postgres",
    async () => {
      const url = await pg.createDatabase(`shared_${databases++}`);
      const handles: OpenedStorage[] = [await openStorage({ dataDir: "unused", url, poolSize: 3 }), await openStorage({ dataDir: "unused", url, poolSize: 3 })];
      closers.push(...handles.map((h) => h.close));
      return [handles[0].db, handles[1].db];
    },
  ],
];

const KEEP = Date.now() + 600_000;

async function authorization(nonce: bigint): Promise<SpendAuthorization> {
  return parseSpendAuthHeader(await signedHeader({ nonce, expiry: BigInt(Math.floor(Date.now() / 1000) + 300) })) as SpendAuthorization;
}

/** A chain that takes every authorization and claim, counting the claims. */
function countingSettler(): { settler: Settler; claims: string[] } {
  const authorized = new Set<string>();
  const claims: string[] = [];
  const settler = {
    getSpendAuth: async (hash: string) => ({ amount: authorized.has(hash) ? 1n : 0n, claimed: claims.includes(hash) }),
    authorizeSpend: async () => "0x01",
    claimPayment: async (hash: string) => {
      claims.push(hash);
      return "0x02";
    },
  } as unknown as Settler;
  return { settler, claims };
}

function worker(db: Db, settler: Settler, holder: string) {
  return startSettlementWorker({
    db,
    settler,
    reservations: new Reservations(),
    now: Date.now,
    intervalMs: 3_600_000,
    maxAttempts: 3,
    log: () => {},
    lease: keepLease(createLease(db, "settlement-worker", { holder, ttlMs: 30_000, now: Date.now }), { ttlMs: 30_000, now: Date.now }),
  });
}

describe.each(engines)("replicas sharing a database on %s", (_engine, open) => {
  test("a nonce recorded through one replica is a replay through another; of one recorded through both at once, one wins", async () => {
    const [a, b] = await open();
    const [first, second] = [createNonceStore(a), createNonceStore(b)];
    expect(await first.record(COMMITMENT, "1", KEEP)).toBe("new");
    expect(await second.record(COMMITMENT, "1", KEEP)).toBeNull();
    const raced = await Promise.all(Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? first : second).record(COMMITMENT, "2", KEEP)));
    expect(raced.filter((r) => r === "new")).toHaveLength(1);
    expect(raced.filter((r) => r === null)).toHaveLength(7);
  });

  test("served authorizations of one turn are written together, a repeat of one ignored, and read by the other replica", async () => {
    const [a, b] = await open();
    const writer = createSettlementWriter(a);
    const [zero, one] = [await authorization(0n), await authorization(1n)];
    const at = Date.now();
    await Promise.all([
      writer.push({ auth: zero, requestId: "req_0", at }),
      writer.push({ auth: one, requestId: "req_1", at }),
      writer.push({ auth: one, requestId: "req_1_again", at }),
    ]);
    expect((await listSettlements(b)).map((r) => [r.nonce, r.requestId, r.state])).toEqual([
      ["1", "req_1", "pending"],
      ["0", "req_0", "pending"],
    ]);
    expect((await readySettlements(b, Date.now(), 50)).map((r) => r.nonce)).toEqual(["0", "1"]);
    expect(await settlementCounts(b)).toEqual({ pending: 2, authorized: 0, done: 0, dead: 0 });
    expect(await writer.closeWithin(0)).toBe(0);
  });

  test("of two workers only the lease's holder settles; once it stops, the other takes over", async () => {
    const [a, b] = await open();
    const writer = createSettlementWriter(a);
    await writer.push({ auth: await authorization(0n), requestId: "req_0", at: Date.now() });
    await writer.push({ auth: await authorization(1n), requestId: "req_1", at: Date.now() });
    const chain = countingSettler();
    const holder = worker(a, chain.settler, "replica-a");
    expect(await holder.runOnce()).toBe(2);
    const other = worker(b, chain.settler, "replica-b");
    expect(await other.runOnce()).toBe(0);
    expect(chain.claims).toHaveLength(2);
    expect(await settlementCounts(b)).toEqual({ pending: 0, authorized: 0, done: 2, dead: 0 });

    await writer.push({ auth: await authorization(2n), requestId: "req_2", at: Date.now() });
    const [byOther, byHolder] = await Promise.all([other.runOnce(), holder.runOnce()]);
    expect([byHolder, byOther]).toEqual([1, 0]);
    await holder.stop(); // releases the lease
    await writer.push({ auth: await authorization(3n), requestId: "req_3", at: Date.now() });
    expect(await other.runOnce()).toBe(1);
    expect(chain.claims).toHaveLength(4);
    await other.stop();
    await writer.closeWithin(0);
  });
});
