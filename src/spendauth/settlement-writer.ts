/**
 * The settlement writer: each served SpendAuth authorization is recorded (./settlements.ts) before
 * its answer goes out (the router calls answered() first, and waits for the promise push returns):
 * at the next start a nonce without a row is given back to its client (nonces.ts forgetUnsettled),
 * so a row written behind and lost to a kill would let the answered header be served a second
 * time, and never be claimed. A write waits only a moment for a lock held elsewhere; a row the
 * database refuses is kept and written later, never dropped while the server runs (a lost row is
 * a payment the operator never claims).
 */
import type { SQL } from "bun";
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf } from "../db/engine";
import { groupPerTurn } from "../db/group-commit";
import { createWriteBehind } from "../db/write-behind";
import { log } from "../log";
import { insertSettlement, insertSettlements, type ServedAuthorization } from "./settlements";

export interface SettlementWriter {
  /**
   * Writes a served authorization now: at once on SQLite; on Postgres with the others pushed in
   * the same event-loop turn, in one statement, the promise settling once it is committed. One the
   * database refuses is kept and written behind.
   */
  push(served: ServedAuthorization): Promise<void> | undefined;
  /** Writes what is kept now (the worker, before it reads the table). */
  flush(): Promise<void> | undefined;
  /** Writes what is kept, retrying for up to `ms` while the database refuses; returns how many are still unwritten. */
  closeWithin(ms: number): Promise<number>;
}

/** SQLite: each row written at once; one refused goes to a write-behind queue that keeps it. */
export function createSettlementWriter(db: Db, options: { now?: () => number } = {}): SettlementWriter {
  const pg = postgresOf(db);
  if (pg) return createPostgresSettlementWriter(pg);
  const writeOne = brieflyLocked(db.$client, (row: ServedAuthorization) => insertSettlement(db, row));
  const write = brieflyLocked(
    db.$client,
    db.$client.transaction((rows: ServedAuthorization[]) => {
      for (const row of rows) insertSettlement(db, row);
    }),
  );
  const kept = createWriteBehind<ServedAuthorization>(write, { label: "spend_auth settlements", intervalMs: 250, keepFailed: true, now: options.now });
  return {
    push(served) {
      try {
        writeOne(served);
      } catch {
        kept.push(served);
      }
      return undefined;
    },
    flush() {
      kept.flush();
      return undefined;
    },
    closeWithin: async (ms) => (await kept.closeWithin(ms)).length,
  };
}

/** The rows of one turn share one statement (../db/group-commit.ts); a batch refused is kept and tried again every RETRY_MS, oldest first. */
function createPostgresSettlementWriter(sql: SQL): SettlementWriter {
  let kept: ServedAuthorization[] = [];
  let retrying: Promise<void> | null = null;
  const keep = (rows: ServedAuthorization[]): void => {
    if (kept.length === 0) log("error", `spend_auth settlements: write failed, ${rows.length} row(s) kept to retry`);
    kept.push(...rows);
  };
  const writeTurn = groupPerTurn<ServedAuthorization, void>(async (rows) => {
    try {
      await insertSettlements(sql, rows);
    } catch {
      keep(rows);
    }
    return rows.map(() => undefined);
  });
  const flush = (): Promise<void> =>
    (retrying ??= (async () => {
      const rows = kept;
      kept = [];
      if (rows.length === 0) return;
      try {
        await insertSettlements(sql, rows);
        log("info", `spend_auth settlements: ${rows.length} kept row(s) written`);
      } catch {
        kept = rows.concat(kept);
      }
    })().finally(() => (retrying = null)));
  const timer = setInterval(() => void flush(), RETRY_MS);
  timer.unref?.();
  return {
    push: writeTurn,
    flush,
    async closeWithin(ms) {
      clearInterval(timer);
      const deadline = Date.now() + ms;
      await flush();
      while (kept.length > 0 && Date.now() < deadline) {
        await Bun.sleep(RETRY_MS);
        await flush();
      }
      return kept.length;
    },
  };
}

const RETRY_MS = 250;
