/**
 * SpendAuth's writes on the request path with the database locked by another process: the replay
 * record is refused within a moment, so the request gets a 503 instead of a 5 s stall and a 500,
 * and the periodic prune is put off instead of throwing out of its timer (which ended the process);
 * a served authorization is written behind and kept until the database takes it.
 */
import { expect, test } from "bun:test";
import { captureLog } from "../support/log";
import { Database } from "bun:sqlite";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { createNonceStore } from "../../src/spendauth/nonces";
import { listSettlements } from "../../src/spendauth/settlements";
import { createSettlementWriter } from "../../src/spendauth/settlement-writer";
import { parseSpendAuthHeader, type SpendAuthorization } from "../../src/spendauth/header";
import { CHAIN_ID, CONTRACT, OPERATOR, signedHeader } from "./helpers";
import { buildConfig } from "../../src/config/load";
import { setupSpendAuth } from "../../src/spendauth/setup";

test("with the database locked elsewhere, recording a nonce fails fast, a release is dropped, and a prune throws for its caller to retry", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-nonces-"));
  const { db, close } = openDatabase(dir);
  const store = createNonceStore(db);
  expect(await store.record("0xabc", "1", Date.now() + 60_000)).toBe("new");
  const other = new Database(join(dir, "modelgate.db"));
  other.run("BEGIN IMMEDIATE");
  try {
    const started = performance.now();
    await expect(store.record("0xabc", "2", Date.now() + 60_000)).rejects.toThrow(/locked/);
    expect(performance.now() - started).toBeLessThan(1_000);
    await expect(store.release("0xabc", "1", Date.now())).resolves.toBeUndefined();
    await expect(store.prune(Date.now())).rejects.toThrow(/locked/);
  } finally {
    other.run("COMMIT");
    other.close();
  }
  expect(await store.record("0xabc", "2", Date.now() + 60_000)).toBe("new");
  expect(await store.record("0xabc", "1", Date.now() + 60_000)).toBeNull(); // its release was dropped
  close();
});

test("a served authorization the locked database refuses is kept and written once the lock goes (regression: a 5 s stall, then the row was dropped: a payment never claimed)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-settle-"));
  const { db, close } = openDatabase(dir);
  let now = 1_000_000;
  const writer = createSettlementWriter(db, { now: () => now });
  const auth = parseSpendAuthHeader(await signedHeader({ expiry: 2_000_000_000n })) as SpendAuthorization;
  const other = new Database(join(dir, "modelgate.db"));
  other.run("BEGIN IMMEDIATE");
  const captured = captureLog();
  try {
    writer.push({ auth, requestId: "req_1", at: now });
    const started = performance.now();
    writer.flush();
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(captured.lines()[0]).toContain("spend_auth settlements: write failed, 1 row(s) kept to retry");
  } finally {
    other.run("COMMIT");
    other.close();
    captured.restore();
  }
  expect(await listSettlements(db)).toHaveLength(0);
  now += 2_000;
  writer.flush();
  expect((await listSettlements(db)).map((row) => [row.state, row.requestId])).toEqual([["pending", "req_1"]]);
  expect(await writer.closeWithin(0)).toBe(0);
  close();
});

test("a stop that cannot write the queued settlements says how many it lost (serve then exits 1)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-settle-stop-"));
  const { db, close } = openDatabase(dir);
  const { config } = buildConfig(
    {
      server: { shutdown_grace_ms: 150 },
      spend_auth: { chain_id: CHAIN_ID, verifying_contract: CONTRACT, operator: OPERATOR.address, allowed_signers: [OPERATOR.address] },
    },
    { env: {} },
  );
  const lines: string[] = [];
  const runtime = await setupSpendAuth({ config, db, now: Date.now, log: (_level, msg) => void lines.push(msg) });
  const auth = parseSpendAuthHeader(await signedHeader({ expiry: 2_000_000_000n })) as SpendAuthorization;
  const other = new Database(join(dir, "modelgate.db"));
  other.run("BEGIN IMMEDIATE");
  const captured = captureLog();
  try {
    runtime.settlements.push({ auth, requestId: "req_1", at: Date.now() });
    expect(await runtime.stop()).toBe(1);
    expect(lines).toContain("spend_auth: 1 served authorization(s) could not be written before the stop and will not be settled");
  } finally {
    other.run("COMMIT");
    other.close();
    captured.restore();
    close();
  }
});
