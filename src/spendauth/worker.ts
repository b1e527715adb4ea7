/**
 * The settlement worker: claims served authorizations on-chain with the operator key, one
 * transaction at a time, in nonce order per commitment (the contract requires strictly
 * sequential nonces). Each row goes pending -> authorized (authorizeSpend mined) -> done
 * (claimPayment mined). A failure is retried with exponential backoff; after
 * spend_auth.settle_max_attempts, or once the authorization has expired, the row is dead.
 * Before resubmitting, the worker asks the contract what already happened (a receipt can be
 * lost), so a restart or a retry never pays twice: the contract itself refuses a double claim.
 * Where several processes share the database, one works at a time: the holder of the
 * "settlement-worker" lease (../db/lease-keeper.ts); the others skip their ticks meanwhile, and
 * the holder stops between rows once it no longer holds it.
 */
import type { Db } from "../db/client";
import type { LeaseKeeper } from "../db/lease-keeper";
import { backoffDelay } from "../backoff";
import type { SpendAuthorization } from "./header";
import type { Reservations } from "./reservations";
import { spendAuthHash } from "./abi";
import type { AccountReader, Settler } from "./chain";
import { readySettlements, updateSettlement, type SettlementRow } from "./settlements";

export interface SettlementWorkerOptions {
  db: Db;
  /** Runs before each tick: writes the served authorizations the database refused earlier (SettlementWriter.flush). */
  beforeTick?: () => Promise<void> | undefined;
  /** The singleton's lease when processes share the database; the worker ticks only while it holds it. */
  lease?: LeaseKeeper;
  settler: Settler;
  reservations: Reservations;
  /** The admission's cached account reads: an authorized spend changes the balance they kept. */
  accounts?: Pick<AccountReader, "forget">;
  now: () => number;
  intervalMs: number;
  maxAttempts: number;
  log: (level: "info" | "warn" | "error", msg: string, fields?: Record<string, unknown>) => void;
  /** The backoff's jitter (../backoff.ts); Math.random unless a test fixes it. */
  random?: () => number;
}

export interface SettlementWorker {
  /** Works through every ready row once (nothing without the lease); resolves to how many were settled. */
  runOnce(): Promise<number>;
  /** Stops ticking, waits for a tick under way, and releases the lease. */
  stop(): Promise<void>;
}

const MAX_BACKOFF_MS = 60_000;

export function startSettlementWorker(options: SettlementWorkerOptions): SettlementWorker {
  let running: Promise<number> | null = null;
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const runOnce = (): Promise<number> =>
    (running ??= (async () => {
      await options.beforeTick?.();
      if (options.lease && !(await options.lease.renew())) return 0;
      return tick(options);
    })().finally(() => (running = null)));
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(
      () =>
        void runOnce()
          .catch((err) => options.log("error", "settlement: tick failed", { error: String(err) }))
          .finally(schedule),
      options.intervalMs,
    );
    timer.unref?.();
  };
  schedule();
  return {
    runOnce,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      if (running) await running.catch(() => 0);
      await options.lease?.stop();
    },
  };
}

async function tick(options: SettlementWorkerOptions): Promise<number> {
  const rows = await readySettlements(options.db, options.now(), 50);
  const blocked = new Set<string>();
  let settled = 0;
  for (const row of rows) {
    // Another process may hold the lease by now: it reads the rows afresh.
    if (options.lease && !options.lease.holds()) break;
    if (blocked.has(row.commitment)) continue;
    const ok = await settleRow(options, row);
    if (ok) settled += 1;
    // Later nonces of this commitment cannot be authorized before this one.
    else if (row.state === "pending") blocked.add(row.commitment);
  }
  return settled;
}

async function settleRow(options: SettlementWorkerOptions, row: SettlementRow): Promise<boolean> {
  const { db, settler, now } = options;
  const auth = authorizationOf(row);
  const authHash = (row.authHash as `0x${string}` | null) ?? spendAuthHash(auth);
  if (Math.floor(now() / 1000) > row.expiry) {
    const onChain = await settler.getSpendAuth(authHash).catch(() => null);
    if (onChain === null) return fail(options, row, "the chain could not be asked about this expired authorization", { dead: false });
    // Authorized on-chain (its receipt lost) or not, recorded: a dead row that used its nonce must not hold back the commitment's later ones.
    if (!onChain.claimed)
      return fail(options, { ...row, authHash: onChain.amount !== 0n ? authHash : row.authHash }, "the authorization expired before it could be settled", {
        dead: true,
      });
  }
  let state = row.state;
  try {
    if (state === "pending") {
      const existing = await settler.getSpendAuth(authHash);
      if (existing.amount === 0n) await settler.authorizeSpend(auth);
      state = "authorized";
      await updateSettlement(db, row.id, { state, authHash, lastError: null }, now());
      // The spend is now in the on-chain balance: it must not be counted again from a kept read.
      options.reservations.remove(row.commitment, row.nonce);
      options.accounts?.forget?.(row.commitment);
    }
    const pending = await settler.getSpendAuth(authHash);
    const txHash = pending.claimed ? row.txHash : await settler.claimPayment(authHash);
    await updateSettlement(db, row.id, { state: "done", authHash, txHash, lastError: null }, now());
    options.log("info", "settlement: claimed", { id: row.id, commitment: row.commitment, nonce: row.nonce, amount: row.amount, tx: txHash });
    return true;
  } catch (err) {
    // A row about to go dead unauthorized is checked once more: its spend may have been mined with
    // the receipt lost, and a dead row taken for an unused nonce holds the commitment's later ones.
    const mined =
      state === "pending" &&
      row.attempts + 1 >= options.maxAttempts &&
      (await settler.getSpendAuth(authHash).then(
        (s) => s.amount !== 0n,
        () => false,
      ));
    // The state as it now is: a failed claim leaves an "authorized" row authorized, not pending.
    return fail(options, { ...row, state, authHash: mined ? authHash : row.authHash }, shortError(err), { dead: false });
  }
}

async function fail(options: SettlementWorkerOptions, row: SettlementRow, error: string, how: { dead: boolean }): Promise<boolean> {
  const attempts = row.attempts + 1;
  const dead = how.dead || attempts >= options.maxAttempts;
  const backoff = backoffDelay(attempts, { firstMs: options.intervalMs, maxMs: MAX_BACKOFF_MS, random: options.random });
  await updateSettlement(
    options.db,
    row.id,
    { state: dead ? "dead" : row.state, authHash: row.authHash, attempts, nextAttemptAt: options.now() + backoff, lastError: error },
    options.now(),
  );
  if (dead) options.reservations.remove(row.commitment, row.nonce);
  options.log(dead ? "error" : "warn", dead ? "settlement: dead" : "settlement: will retry", {
    id: row.id,
    commitment: row.commitment,
    nonce: row.nonce,
    attempts,
    error,
  });
  return false;
}

function authorizationOf(row: SettlementRow): SpendAuthorization {
  const raw = JSON.parse(row.authorization) as Record<string, string | number>;
  return {
    commitment: raw.commitment as `0x${string}`,
    serviceId: BigInt(raw.serviceId),
    jobIndex: Number(raw.jobIndex),
    amount: BigInt(raw.amount),
    operator: raw.operator as `0x${string}`,
    nonce: BigInt(raw.nonce),
    expiry: BigInt(raw.expiry),
    signature: raw.signature as `0x${string}`,
  };
}

/**
 * A viem error in one line: its first line (never the request body or the RPC URL, which follow),
 * and for a revert the contract error it decoded, with its arguments (`InvalidNonce(2, 7)`) or
 * the revert reason string.
 */
function shortError(err: unknown): string {
  const e = err as { shortMessage?: string; message?: string };
  const first = String(e?.shortMessage ?? e?.message ?? err).split("\n")[0];
  const revert = revertOf(err);
  return (revert && !first.includes(revert) ? `${first} ${revert}` : first).slice(0, 300);
}

/** The decoded revert somewhere in an error's cause chain: `Name(args)` or the reason string. */
function revertOf(err: unknown): string | null {
  for (let e = err as { cause?: unknown; reason?: unknown; data?: { errorName?: unknown; args?: readonly unknown[] } } | null; e; e = e.cause as typeof e) {
    if (typeof e !== "object") return null;
    const name = e.data?.errorName;
    if (typeof name === "string" && name !== "Error") return `${name}(${(e.data?.args ?? []).map(String).join(", ")})`;
    if (typeof e.reason === "string" && e.reason) return e.reason;
  }
  return null;
}
