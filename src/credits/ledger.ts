/**
 * Balances and the ledger, as plain functions over a database handle (the server, the admin
 * route and the CLI share them). Invariant: a user's `balances.micro` equals the sum of their
 * ledger rows; both change in one transaction. Ledger `micro` is the signed change to the balance:
 * grants and refunds positive, debits negative. Amounts are integer micro-credits. A note is
 * stored as one line of at most NOTE_MAX_CHARS characters, any API key in it masked (storedLabel).
 *
 * Balances change by one atomic statement on either engine (`micro = micro + x`, never a value read
 * and written back), so replicas sharing Postgres lose no update to each other.
 *
 *   grantCredits(db, { userId, micro, note? })  -> new balance, or null past MAX_BALANCE_MICRO
 *   refundCredits(db, { userId, micro, requestId?, note? }) -> the same
 *   getBalance(db, userId)                      -> balance (0 when the user never had credits)
 *   createDebitWriter(db)                       -> the meter's batch writer (summed per user and model):
 *                                                  synchronous on SQLite, one statement on Postgres
 *   storedBalanceCache(db)                      -> the request path's balances, forgotten on every change here
 *   storedKeySpendCache(db)                     -> the request path's per-key spend in the current budget period
 *   keySpendSince(db, keyId, since)             -> micro-credits a key's debits took since `since`
 */
import { desc, eq, sql } from "drizzle-orm";
import { createBatchInsert } from "../db/batch-insert";
import { mapPerDatabase, type Db } from "../db/client";
import { postgresOf, tablesOf, transact, type Tables } from "../db/engine";
import { storedLabel } from "../auth/apikey";
import { MAX_BALANCE_MICRO } from "./amount";

export interface Debit {
  userId: number;
  /** The API key spent with, or null (a session). */
  keyId: string | null;
  micro: number;
  requestId: string;
  model: string;
  at: number;
}

/**
 * Stored balances the request path has read (../auth/key-verifier.ts), one map per database.
 * Every balance change made here deletes its user's entry, in the same synchronous step as the
 * write; changes committed by other processes empty the map through the verifier's poll.
 */
export const storedBalanceCache = mapPerDatabase<number, number>();

/**
 * What each key's debits took in its current budget period, as stored: `start` is the period's
 * start the sum is from. A debit batch adds its keys' amounts in the step that writes them (a sum
 * read again would scan the period's rows); the verifier's poll empties it on other processes'
 * commits, and an entry for a period that has ended is read again.
 */
export const storedKeySpendCache = mapPerDatabase<string, { start: number; micro: number }>();

/**
 * Micro-credits the key's debits took at or after `since` (ms), refunds to the user not netted. A
 * number on SQLite (the request path reads it in the turn it needs it), a promise on Postgres.
 */
export function keySpendSince(db: Db, keyId: string, since: number): number | Promise<number> {
  const pg = postgresOf(db);
  if (pg !== null) {
    return pg`SELECT -SUM(micro) AS spent FROM ledger WHERE key_id = ${keyId} AND created_at >= ${since} AND kind = 'debit'`.then(
      (rows: Array<{ spent: string | number | null }>) => Number(rows[0]?.spent ?? 0),
    );
  }
  const row = db.$client
    .query<{ spent: number | null }, [string, number]>("SELECT -SUM(micro) AS spent FROM ledger WHERE key_id = ? AND created_at >= ? AND kind = 'debit'")
    .get(keyId, since);
  return row?.spent ?? 0;
}

/** A grant's or refund's note is stored as a one-line label of at most this many characters. */
const NOTE_MAX_CHARS = 200;

export async function getBalance(db: Db, userId: number): Promise<number> {
  const { balances } = tablesOf(db);
  const [row] = await db.select({ micro: balances.micro }).from(balances).where(eq(balances.userId, userId)).limit(1);
  return row?.micro ?? 0;
}

export function grantCredits(db: Db, input: { userId: number; micro: number; note?: string; now?: number }): Promise<number | null> {
  return change(db, { ...input, kind: "grant" });
}

export function refundCredits(db: Db, input: { userId: number; micro: number; requestId?: string; note?: string; now?: number }): Promise<number | null> {
  return change(db, { ...input, kind: "refund" });
}

/**
 * The new balance; null, and nothing written, when it would pass MAX_BALANCE_MICRO. The check is
 * part of the balance's one upsert (a condition on the row it changes), so two grants racing on
 * two replicas cannot both pass it, and the ledger row commits with it. An amount that is not a
 * positive integer throws at once, before anything is asked of the database.
 */
function change(
  db: Db,
  input: { userId: number; micro: number; kind: "grant" | "refund"; requestId?: string; note?: string; now?: number },
): Promise<number | null> {
  if (!Number.isSafeInteger(input.micro) || input.micro <= 0) throw new RangeError("a credit change must be a positive integer of micro-credits");
  return input.micro > MAX_BALANCE_MICRO ? Promise.resolve(null) : write(db, input);
}

async function write(
  db: Db,
  input: { userId: number; micro: number; kind: "grant" | "refund"; requestId?: string; note?: string; now?: number },
): Promise<number | null> {
  const balance = await transact(db, async (tx) => {
    const { balances, ledger } = tablesOf(tx);
    const [row] = await tx
      .insert(balances)
      .values({ userId: input.userId, micro: input.micro })
      .onConflictDoUpdate({
        target: balances.userId,
        set: { micro: sql`${balances.micro} + ${input.micro}` },
        setWhere: sql`${balances.micro} + ${input.micro} <= ${MAX_BALANCE_MICRO}`,
      })
      .returning({ micro: balances.micro });
    if (row === undefined) return null;
    await tx.insert(ledger).values({
      userId: input.userId,
      kind: input.kind,
      micro: input.micro,
      requestId: input.requestId ?? null,
      note: input.note === undefined ? null : storedLabel(input.note, NOTE_MAX_CHARS) || null,
      createdAt: input.now ?? Date.now(),
    });
    return row.micro;
  });
  storedBalanceCache(db).delete(input.userId);
  return balance;
}

/**
 * Writes a batch of request debits in one transaction: one ledger row per user and model (the
 * batch's requests summed per key too; the row keeps the request id when it covers one request, else notes
 * how many), one balance update per user. Each request's own cost is in the request log; the
 * ledger records the money (per key, for budgets), so it grows with flushes, not with requests.
 */
export function createDebitWriter(db: Db): (debits: Debit[]) => void | Promise<void> {
  const cache = storedBalanceCache(db);
  const keySpend = storedKeySpendCache(db);
  const noteWritten = (entries: DebitEntry[]): void => {
    for (const e of entries) {
      cache.delete(e.userId);
      // Added in place, not forgotten: reading a key's spend again is a sum over its period's rows.
      const spent = e.keyId === null ? undefined : keySpend.get(e.keyId);
      if (spent !== undefined && e.at >= spent.start) spent.micro += e.micro;
    }
  };
  const pg = postgresOf(db);
  if (pg !== null) {
    return async (debits) => {
      const entries = debitEntries(debits);
      const rows = entries.map((e) => ({
        user_id: e.userId,
        micro: -e.micro,
        request_id: requestIdOf(e),
        model: e.model,
        note: noteOf(e),
        key_id: e.keyId,
        created_at: e.at,
      }));
      // One statement, so one atomic commit and one round trip: the ledger rows, then each user's
      // balance moved by their sum in place. Users in id order: two replicas' batches lock alike.
      await pg`WITH d AS (SELECT * FROM jsonb_populate_recordset(NULL::ledger, ${JSON.stringify(rows)}::text::jsonb)),
        logged AS (INSERT INTO ledger (user_id, kind, micro, request_id, model, note, key_id, created_at)
          SELECT user_id, 'debit', micro, request_id, model, note, key_id, created_at FROM d)
        INSERT INTO balances (user_id, micro) SELECT user_id, sum(micro) FROM d GROUP BY user_id ORDER BY user_id
        ON CONFLICT (user_id) DO UPDATE SET micro = balances.micro + EXCLUDED.micro`;
      noteWritten(entries);
    };
  }
  const insertRows = createBatchInsert<DebitEntry>(
    db.$client,
    "INSERT INTO ledger (user_id, kind, micro, request_id, model, note, key_id, created_at) VALUES ",
    8,
    (values, e) => values.push(e.userId, "debit", -e.micro, requestIdOf(e), e.model, noteOf(e), e.keyId, e.at),
  );
  const upsert = db.$client.prepare<unknown, [number, number]>(
    "INSERT INTO balances (user_id, micro) VALUES (?1, ?2) ON CONFLICT (user_id) DO UPDATE SET micro = micro + ?2",
  );
  const write = db.$client.transaction((debits: Debit[]) => {
    const entries = debitEntries(debits);
    insertRows(entries);
    const perUser = new Map<number, number>();
    for (const e of entries) perUser.set(e.userId, (perUser.get(e.userId) ?? 0) + e.micro);
    for (const [userId, micro] of perUser) upsert.run(userId, -micro);
    noteWritten(entries);
  });
  return (debits) => write(debits);
}

/** The ledger row keeps the request id when it covers one request, else notes how many. */
function requestIdOf(e: DebitEntry): string | null {
  return e.requests === 1 ? e.requestId : null;
}

function noteOf(e: DebitEntry): string | null {
  return e.requests === 1 ? null : `${e.requests} requests`;
}

/** A batch's debits of one user, key and model, summed; `at` is the latest, `requestId` the first. */
interface DebitEntry extends Debit {
  requests: number;
}

function debitEntries(debits: Debit[]): DebitEntry[] {
  const byUserModel = new Map<string, DebitEntry>();
  for (const d of debits) {
    const key = `${d.userId} ${d.keyId} ${d.model}`;
    const entry = byUserModel.get(key);
    if (entry === undefined) {
      byUserModel.set(key, { ...d, requests: 1 });
    } else {
      entry.micro += d.micro;
      entry.requests += 1;
      entry.at = Math.max(entry.at, d.at);
    }
  }
  return [...byUserModel.values()];
}

/** A user's recent ledger entries, newest first (the dashboard's credits page). */
export function listLedger(db: Db, input: { userId: number; limit?: number }): Promise<Array<Tables["ledger"]["$inferSelect"]>> {
  const { ledger } = tablesOf(db);
  return db
    .select()
    .from(ledger)
    .where(eq(ledger.userId, input.userId))
    .orderBy(desc(ledger.createdAt), desc(ledger.id))
    .limit(input.limit ?? 50);
}
