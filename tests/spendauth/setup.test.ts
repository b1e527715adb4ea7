/**
 * SpendAuth configuration checks (ConfigErrors naming the key) and the settlement worker's
 * retry and dead states when the chain cannot be reached.
 */
import { describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runCli } from "../../src/cli/index";
import { buildConfig, ConfigError } from "../../src/config/load";
import { openDatabase } from "../../src/db/client";
import { setupSpendAuth } from "../../src/spendauth/setup";
import { createPublic, createSettler, type Settler } from "../../src/spendauth/chain";
import { enqueueSettlement, listSettlements, readySettlements, retrySettlement, settlementCounts, updateSettlement } from "../../src/spendauth/settlements";
import { startSettlementWorker } from "../../src/spendauth/worker";
import { createNonceStore } from "../../src/spendauth/nonces";
import { Reservations } from "../../src/spendauth/reservations";
import { parseSpendAuthHeader, type SpendAuthorization } from "../../src/spendauth/header";
import { CHAIN_ID, CONTRACT, KEYS, OPERATOR, signedHeader } from "./helpers";

function setupWith(spendAuth: Record<string, unknown>): () => Promise<void> {
  const { config } = buildConfig({ spend_auth: spendAuth }, { env: {} });
  const { db } = openDatabase(":memory:");
  return async () => void (await setupSpendAuth({ config, db, now: Date.now, log: () => {} })).stop();
}

describe("configuration", () => {
  const base = { chain_id: CHAIN_ID, verifying_contract: CONTRACT, operator: OPERATOR.address };
  /** The error `config check` (buildConfig) gives, so that it refuses what `serve` would. */
  const configError = (spendAuth: Record<string, unknown>) => () => buildConfig({ spend_auth: spendAuth }, { env: {} });
  test("operator_key without rpc_url names the key, with or without allowed_signers (regression: alone it was ignored)", () => {
    const error = new ConfigError("spend_auth.operator_key: settling on-chain needs spend_auth.rpc_url");
    expect(configError({ ...base, allowed_signers: [OPERATOR.address], operator_key: KEYS.operator })).toThrow(error);
    expect(configError({ operator_key: KEYS.operator })).toThrow(error);
  });
  test("an operator_key for another address is refused at start-up, and by config check (regression: config check said ok)", async () => {
    await expect(setupWith({ ...base, rpc_url: "http://127.0.0.1:9", operator_key: KEYS.stranger })()).rejects.toThrow(/spend_auth\.operator_key: controls 0x/);
    const dir = mkdtempSync(join(tmpdir(), "modelgate-spend-"));
    const file = join(dir, "modelgate.toml");
    writeFileSync(
      file,
      `[spend_auth]\nchain_id = ${CHAIN_ID}\nverifying_contract = "${CONTRACT}"\noperator = "${OPERATOR.address}"\nrpc_url = "http://127.0.0.1:9"\noperator_key = "${KEYS.stranger}"\n`,
    );
    const error = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["config", "check", "--config", file])).not.toBe(0);
      expect(error.mock.calls.map((c) => String(c[0])).join("\n")).toMatch(/spend_auth\.operator_key: controls 0x/);
      expect(printed.mock.calls.map((c) => String(c[0])).join("\n")).not.toContain(KEYS.stranger.slice(2, 20));
    } finally {
      error.mockRestore();
      printed.mockRestore();
    }
  });
  test("a malformed operator_key is refused without echoing it", () => {
    for (const key of ["0x1234", "0xzz", `0x${"g".repeat(64)}`]) {
      const run = configError({ ...base, rpc_url: "http://127.0.0.1:9", operator_key: key });
      expect(run).toThrow(new ConfigError("spend_auth.operator_key: not a 32-byte hex private key"));
    }
  });
  test("allowed_signers or rpc_url without an operator or a contract names the missing key", () => {
    expect(configError({ verifying_contract: CONTRACT, allowed_signers: [OPERATOR.address] })).toThrow(/^spend_auth\.operator: required/);
    expect(configError({ operator: OPERATOR.address, rpc_url: "http://127.0.0.1:9" })).toThrow(/^spend_auth\.verifying_contract: required/);
  });
  test("with nothing configured SpendAuth is off and setup succeeds", async () => {
    await expect(setupWith({})()).resolves.toBeUndefined();
  });
});

describe("start-up", () => {
  test("nonces admitted before a crash whose settlement row was never written are the clients' again; settled ones stay taken (regression: the commitment was locked out until they expired)", async () => {
    const { config } = buildConfig(
      { spend_auth: { chain_id: CHAIN_ID, verifying_contract: CONTRACT, operator: OPERATOR.address, allowed_signers: [OPERATOR.address] } },
      { env: {} },
    );
    const { db } = openDatabase(":memory:");
    const commitment = `0x${"11".repeat(32)}`;
    const later = Date.now() + 3_600_000;
    const nonces = createNonceStore(db);
    // Nonce 1 was served and its row written; nonce 2 was admitted, then the process was killed.
    const served = parseSpendAuthHeader(await signedHeader({ nonce: 1n })) as SpendAuthorization;
    await nonces.record(commitment, "1", later);
    await enqueueSettlement(db, served, "req_1", Date.now());
    await nonces.record(commitment, "2", later);
    const logged: string[] = [];
    await (await setupSpendAuth({ config, db, now: Date.now, log: (_level, message) => void logged.push(message) })).stop();
    const kept = db.$client.query("SELECT nonce FROM spend_nonces ORDER BY nonce").all() as Array<{ nonce: string }>;
    expect(kept.map((r) => r.nonce)).toEqual(["1"]);
    expect(logged).toContain(
      "spend_auth: 1 authorization(s) admitted before the last stop have no settlement row of their own (the process died before writing it); their nonces are the clients' again",
    );
  });
});

describe("settlement order", () => {
  test("a later nonce waits while an earlier one of its commitment waits out a backoff (regression: tried anyway, it failed, and its failures made it dead)", async () => {
    const { db } = openDatabase(":memory:");
    const now = Date.now();
    for (const nonce of [0n, 1n, 10n]) await enqueueSettlement(db, parseSpendAuthHeader(await signedHeader({ nonce })) as SpendAuthorization, null, now);
    const other = parseSpendAuthHeader(await signedHeader({ nonce: 5n, commitment: `0x${"22".repeat(32)}` })) as SpendAuthorization;
    await enqueueSettlement(db, other, null, now);
    const ready = async () => (await readySettlements(db, now, 50)).map((r) => `${r.commitment.slice(2, 4)}:${r.nonce}`);
    expect(await ready()).toEqual(["11:0", "11:1", "11:10", "22:5"]); // oldest nonce first; the worker stops at a failure
    const first = (await listSettlements(db)).find((r) => r.nonce === "0")!;
    await updateSettlement(db, first.id, { attempts: 1, nextAttemptAt: now + 60_000 }, now);
    expect(await ready()).toEqual(["22:5"]); // nonce 0 waits out its backoff: 1 and 10 wait with it
    await updateSettlement(db, first.id, { state: "authorized", nextAttemptAt: now + 60_000 }, now);
    expect(await ready()).toEqual(["11:1", "11:10", "22:5"]); // 0 is taken on-chain (its claim waits): 1 and 10 may go
    await updateSettlement(db, first.id, { state: "dead", authHash: null }, now);
    expect(await ready()).toEqual(["22:5"]); // 0 is dead unauthorized: 1 and 10 wait until it is signed again
    expect((await readySettlements(db, (Number(first.expiry) + 1) * 1000, 50)).map((r) => r.nonce)).toEqual(["1", "10", "5"]); // expired, they may only be found dead
  });
});

describe("settlement worker failures", () => {
  test("an unreachable chain is retried with backoff, then dead, and retry queues it again", async () => {
    const { db } = openDatabase(":memory:");
    let now = 1_000_000;
    const auth = parseSpendAuthHeader(await signedHeader({ expiry: 2_000_000_000n })) as SpendAuthorization;
    await enqueueSettlement(db, auth, "req_1", now);
    const settler = createSettler(createPublic({ rpcUrl: "http://127.0.0.1:9", chainId: CHAIN_ID, contract: CONTRACT, timeoutMs: 1000 }), {
      rpcUrl: "http://127.0.0.1:9",
      chainId: CHAIN_ID,
      contract: CONTRACT,
      timeoutMs: 1000,
      operatorKey: KEYS.operator,
    });
    const worker = startSettlementWorker({
      db,
      settler,
      reservations: new Reservations(),
      now: () => now,
      intervalMs: 3_600_000,
      maxAttempts: 3,
      log: () => {},
      random: () => 0,
    });
    expect(await worker.runOnce()).toBe(0);
    let [row] = await listSettlements(db);
    expect(row).toMatchObject({ state: "pending", attempts: 1 });
    expect(row.nextAttemptAt).toBe(now + 60_000); // backoff is capped at 60 s
    expect(row.lastError).toBeTruthy();
    expect(await worker.runOnce()).toBe(0); // not due yet: nothing happens
    expect((await listSettlements(db))[0].attempts).toBe(1);
    for (let i = 0; i < 2; i++) {
      now = (await listSettlements(db))[0].nextAttemptAt;
      await worker.runOnce();
    }
    [row] = await listSettlements(db);
    expect(row).toMatchObject({ state: "dead", attempts: 3 });
    expect(await settlementCounts(db)).toEqual({ pending: 0, authorized: 0, done: 0, dead: 1 });
    expect(await retrySettlement(db, row.id, now)).toBe(true);
    expect((await listSettlements(db))[0]).toMatchObject({ state: "pending", attempts: 0 });
    await worker.stop();
  });

  test("a claim that fails after the spend was authorized keeps the row authorized; the account's kept read is dropped", async () => {
    const { db } = openDatabase(":memory:");
    const auth = parseSpendAuthHeader(await signedHeader({ expiry: 2_000_000_000n })) as SpendAuthorization;
    await enqueueSettlement(db, auth, "req_1", 1_000_000);
    const reservations = new Reservations();
    reservations.add(auth.commitment, auth.nonce.toString(), auth.amount, Number(auth.expiry));
    let authorized = false;
    // A chain that authorizes the spend but refuses the claim.
    const settler = {
      getSpendAuth: async () => ({ amount: authorized ? auth.amount : 0n, claimed: false }),
      authorizeSpend: async () => void (authorized = true),
      claimPayment: async () => {
        throw new Error("claimPayment reverted");
      },
    } as unknown as Settler;
    const forgotten: string[] = [];
    const worker = startSettlementWorker({
      db,
      settler,
      reservations,
      accounts: { forget: (c) => void forgotten.push(c) },
      now: () => 1_000_000,
      intervalMs: 3_600_000,
      maxAttempts: 8,
      log: () => {},
    });
    await worker.runOnce();
    // Regression: the failed claim wrote the row's old state, "pending", over "authorized".
    expect((await listSettlements(db))[0]).toMatchObject({ state: "authorized", attempts: 1, lastError: "claimPayment reverted" });
    expect(reservations.total(auth.commitment, 1_000_000)).toBe(0n);
    expect(forgotten).toEqual([auth.commitment]);
    await worker.stop();
  });

  test("an expired authorization goes dead without retries, its hash kept when its spend was authorized on-chain; with the chain unreachable it waits (regression: a lost receipt made a dead row look unauthorized, and it held the commitment's later nonces for good)", async () => {
    const outcome = async (onChain: "unused" | "authorized" | "unreachable") => {
      const { db } = openDatabase(":memory:");
      const auth = parseSpendAuthHeader(await signedHeader({ expiry: 1_000n })) as SpendAuthorization;
      await enqueueSettlement(db, auth, null, 5_000_000);
      const settler = {
        getSpendAuth: async () => {
          if (onChain === "unreachable") throw new Error("fetch failed");
          return { amount: onChain === "authorized" ? auth.amount : 0n, claimed: false };
        },
      } as unknown as Settler;
      const worker = startSettlementWorker({
        db,
        settler,
        reservations: new Reservations(),
        now: () => 5_000_000,
        intervalMs: 3_600_000,
        maxAttempts: 8,
        log: () => {},
      });
      await worker.runOnce();
      await worker.stop();
      const { state, attempts, lastError, authHash } = (await listSettlements(db))[0];
      return { state, attempts, lastError, authorized: authHash !== null };
    };
    const expired = "the authorization expired before it could be settled";
    expect(await outcome("unused")).toEqual({ state: "dead", attempts: 1, lastError: expired, authorized: false });
    expect(await outcome("authorized")).toEqual({ state: "dead", attempts: 1, lastError: expired, authorized: true });
    expect(await outcome("unreachable")).toEqual({
      state: "pending",
      attempts: 1,
      lastError: "the chain could not be asked about this expired authorization",
      authorized: false,
    });
  });

  test("a row whose last attempt fails after its spend was mined (the receipt lost) dies with its hash kept", async () => {
    const { db } = openDatabase(":memory:");
    const auth = parseSpendAuthHeader(await signedHeader({ expiry: 2_000_000_000n })) as SpendAuthorization;
    await enqueueSettlement(db, auth, null, 1_000_000);
    let mined = false;
    const settler = {
      getSpendAuth: async () => ({ amount: mined ? auth.amount : 0n, claimed: false }),
      authorizeSpend: async () => {
        mined = true;
        throw new Error("timed out waiting for the receipt");
      },
    } as unknown as Settler;
    const worker = startSettlementWorker({
      db,
      settler,
      reservations: new Reservations(),
      now: () => 1_000_000,
      intervalMs: 3_600_000,
      maxAttempts: 1,
      log: () => {},
    });
    await worker.runOnce();
    await worker.stop();
    expect((await listSettlements(db))[0]).toMatchObject({ state: "dead", lastError: "timed out waiting for the receipt" });
    expect((await listSettlements(db))[0].authHash).not.toBeNull();
  });

  test("a new authorization for a nonce whose earlier one expired unclaimed replaces it; the same one, or one authorized on-chain, is kept (regression: the new one was dropped, never paid)", async () => {
    const { db } = openDatabase(":memory:");
    const old = parseSpendAuthHeader(await signedHeader({ nonce: 3n, expiry: 1_000n, amount: 5n })) as SpendAuthorization;
    await enqueueSettlement(db, old, "req_old", 1_000);
    db.$client.run("UPDATE settlements SET state = 'dead', attempts = 8, last_error = 'expired'");
    const resigned = parseSpendAuthHeader(await signedHeader({ nonce: 3n, expiry: 9_000n, amount: 7n })) as SpendAuthorization;
    await enqueueSettlement(db, resigned, "req_new", 2_000);
    await enqueueSettlement(db, resigned, "req_again", 3_000); // the same authorization again: ignored
    expect(await listSettlements(db)).toMatchObject([
      { nonce: "3", amount: "7", expiry: 9_000, requestId: "req_new", state: "pending", attempts: 0, lastError: null },
    ]);
    db.$client.run("UPDATE settlements SET state = 'authorized', auth_hash = '0xabc'");
    await enqueueSettlement(db, parseSpendAuthHeader(await signedHeader({ nonce: 3n, expiry: 20_000n, amount: 9n })) as SpendAuthorization, "req_late", 4_000);
    expect(await listSettlements(db)).toMatchObject([{ amount: "7", requestId: "req_new", state: "authorized" }]);
  });
});
