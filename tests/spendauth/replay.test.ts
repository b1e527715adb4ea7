/**
 * The nonce records of SpendAuth (src/spendauth/nonces.ts, nonces-pg.ts) around a settlement that
 * went dead before its spend was authorized on-chain, on SQLite and on a real Postgres: a new
 * authorization may take the nonce once; given back unserved, or lost to a crash before its row
 * was written, the record returns to the dead row's authorization, never to nobody (then that
 * one, still unexpired, could be served twice).
 */
import { describe, expect, test } from "bun:test";
import { tablesOf } from "../../src/db/engine";
import { createNonceStore } from "../../src/spendauth/nonces";
import { enqueueSettlement, listSettlements, retrySettlement } from "../../src/spendauth/settlements";
import { parseSpendAuthHeader, type SpendAuthorization } from "../../src/spendauth/header";
import { COMMITMENT, signedHeader } from "./helpers";
import { bothEngines } from "../support/engines";

const NOW_S = Math.floor(Date.now() / 1000);
/** The record's keep-until for an authorization expiring `ahead` seconds from now (expiry + 30 s of skew). */
const keep = (ahead: number) => (NOW_S + ahead + 30) * 1000;

/** A fresh database of the engine for each test. */
const engines = bothEngines();

describe.each(engines)("a nonce whose settlement went dead unauthorized, on %s", (_engine, open) => {
  /** Nonce 5 served with an authorization expiring in 300 s, its settlement dead before authorizeSpend. */
  async function deadNonce() {
    const db = await open();
    const nonces = createNonceStore(db);
    expect(await nonces.record(COMMITMENT, "5", keep(300))).toBe("new");
    const auth = parseSpendAuthHeader(await signedHeader({ nonce: 5n, expiry: BigInt(NOW_S + 300) })) as SpendAuthorization;
    await enqueueSettlement(db, auth, "req_a", Date.now());
    await db.update(tablesOf(db).settlements).set({ state: "dead" });
    return { db, nonces };
  }

  test("is taken once by an authorization kept longer; never by the dead one itself or a shorter one", async () => {
    const { nonces } = await deadNonce();
    expect(await nonces.record(COMMITMENT, "5", keep(300))).toBeNull();
    expect(await nonces.record(COMMITMENT, "5", keep(200))).toBeNull();
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
    expect(await nonces.record(COMMITMENT, "5", keep(900))).toBeNull();
  });

  test("a replacement given back unserved returns it to the dead one: it can be replaced again, and the dead one is still a replay", async () => {
    const { nonces } = await deadNonce();
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
    await nonces.release(COMMITMENT, "5", Date.now());
    expect(await nonces.record(COMMITMENT, "5", keep(300))).toBeNull();
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
  });

  test("the operator cannot retry the dead row while a replacement holds its nonce; given back, the record stays with that row's authorization (regressions: a retry raced a replacement, one of the two served unpaid; deleted, the retried one could be served twice)", async () => {
    const { db, nonces } = await deadNonce();
    const row = (await listSettlements(db))[0];
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
    expect(await retrySettlement(db, row.id, Date.now())).toBe(false);
    await nonces.release(COMMITMENT, "5", Date.now());
    expect(await retrySettlement(db, row.id, Date.now())).toBe(true);
    await nonces.release(COMMITMENT, "5", Date.now()); // as a refused request of the retried one's client would
    expect(await nonces.record(COMMITMENT, "5", keep(300))).toBeNull();
  });

  test("given back once the row's authorization has expired, the record goes: nothing is left to protect; the next is still a replacement (regression: counted as new, a failed one was claimed)", async () => {
    const { nonces } = await deadNonce();
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
    await nonces.release(COMMITMENT, "5", keep(300) + 1);
    expect(await nonces.record(COMMITMENT, "5", keep(100))).toBe("replacing");
  });

  test("of two uses of one nonce recorded together, the first wins", async () => {
    const db = await open();
    const record = { commitment: COMMITMENT, nonce: "7", keepUntilMs: keep(300) };
    expect(await createNonceStore(db).recordAll([record, { ...record, nonce: "8" }, record])).toEqual(["new", "new", null]);
  });

  test("a nonce never served is new", async () => {
    const db = await open();
    expect(await createNonceStore(db).record(COMMITMENT, "6", keep(300))).toBe("new");
  });

  test("a replacement served but lost to a crash before its row was written gives the nonce back at the next start (regression: locked until the replacement expired)", async () => {
    const { nonces } = await deadNonce();
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
    expect(await nonces.forgetUnsettled()).toBe(1);
    expect(await nonces.record(COMMITMENT, "5", keep(600))).toBe("replacing");
  });
});
