/**
 * Replay protection for SpendAuth: each (commitment, nonce) is recorded in the database (SQLite
 * here, Postgres in ./nonces-pg.ts) in one transaction, committed before the upstream is called
 * (a record already there is a replay, but for the dead case below), so of any number of
 * concurrent uses of one authorization exactly one wins, across replicas and
 * restarts too. Records are kept until the
 * authorization's expiry plus the skew allowance (after that the time check refuses it anyway).
 * A record is released only when its request was refused or nothing was served, so the client can
 * retry with the same signed authorization. At start-up, records without a settlement row are
 * forgotten (forgetUnsettled): a served authorization's row is written before its answer goes out
 * (./settlements.ts createSettlementWriter), so theirs are requests no upstream had answered when
 * the process died (or whose row the database refused then); nothing will ever claim them, and
 * kept they would lock the commitment out (its next nonce could never be claimed before this one)
 * until they expired.
 * A nonce whose served authorization went dead before it was authorized on-chain (an RPC outage
 * longer than the retries) is still unused on-chain, and the contract takes no later nonce of the
 * commitment before it (the later rows wait: readySettlements): a new authorization for it,
 * expiring later, may take it once. Its row is replaced when that one is served
 * (enqueueSettlement), and the commitment moves on again. A record given back while a settlement
 * row exists returns to that row's authorization: it is never left to nobody while that one could
 * still be served again.
 */
import { brieflyLocked, type Db } from "../db/client";
import { postgresOf } from "../db/engine";
import { EXPIRY_SKEW_S } from "./header";
import type { NonceRecord, NonceStore, Recorded } from "./nonce-store";
import { createPostgresNonceStore } from "./nonces-pg";
import { deadUnauthorized } from "./settlements";

/** The settlement row `s` went dead before its spend was authorized on-chain: its nonce is unused there. */
const DEAD_UNAUTHORIZED = deadUnauthorized("s");

/**
 * SQL: the keep-until (ms) of the authorization in the settlement row of (`commitment`, `nonce`),
 * both SQL expressions, `skew` the skew parameter; `onlyDead` limits it to a dead unauthorized row.
 */
function rowKeepUntil(commitment: string, nonce: string, skew: string, options: { onlyDead?: boolean } = {}): string {
  const dead = options.onlyDead ? ` AND ${DEAD_UNAUTHORIZED}` : "";
  return `(SELECT (s.expiry + ${skew}) * 1000 FROM settlements s WHERE s.commitment = ${commitment} AND s.nonce = ${nonce}${dead})`;
}

/**
 * Each write waits at most a moment for a lock held elsewhere. A refused record throws (the
 * request gets a 503), a refused prune throws (tried again later), a refused release is dropped.
 */
export function createNonceStore(db: Db): NonceStore {
  const pg = postgresOf(db);
  if (pg) return createPostgresNonceStore(pg);
  const sqlite = db.$client;
  const skewS = Number(EXPIRY_SKEW_S);
  /** The keep-until of the authorization in the settlement row of (?1 commitment, ?2 nonce); ?3 is the skew. */
  const keepUntil = rowKeepUntil("?1", "?2", "?3");
  const insert = sqlite.prepare<unknown, [string, string, number]>(
    "INSERT INTO spend_nonces (commitment, nonce, expires_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
  );
  const deadRow = sqlite.prepare<unknown, [string, string]>(`SELECT 1 FROM settlements s WHERE s.commitment = ? AND s.nonce = ? AND ${DEAD_UNAUTHORIZED}`);
  // Taken again only while the record is still the dead authorization's own (its keep-until is that
  // expiry plus the skew): of concurrent replacements the first moves it on, the rest conflict.
  const retake = sqlite.prepare<unknown, [string, string, number, number]>(
    `UPDATE spend_nonces SET expires_at = ?4 WHERE commitment = ?1 AND nonce = ?2 AND expires_at < ?4
       AND expires_at <= ${rowKeepUntil("?1", "?2", "?3", { onlyDead: true })}`,
  );
  // Deleted, the record would let the row's authorization, still unexpired, be served again, and
  // its second settlement would be ignored: served twice, claimed once.
  const restore = sqlite.prepare<unknown, [string, string, number, number]>(
    `UPDATE spend_nonces SET expires_at = ${keepUntil} WHERE commitment = ?1 AND nonce = ?2 AND ${keepUntil} >= ?4`,
  );
  const remove = sqlite.prepare<unknown, [string, string]>("DELETE FROM spend_nonces WHERE commitment = ? AND nonce = ?");
  const expired = sqlite.prepare<unknown, [number]>("DELETE FROM spend_nonces WHERE expires_at < ?");
  const unsettled = sqlite.prepare<unknown, []>(
    "DELETE FROM spend_nonces WHERE NOT EXISTS (SELECT 1 FROM settlements s WHERE s.commitment = spend_nonces.commitment AND s.nonce = spend_nonces.nonce)",
  );
  const deadKeepUntil = rowKeepUntil("spend_nonces.commitment", "spend_nonces.nonce", "?1", { onlyDead: true });
  const replacedUnwritten = sqlite.prepare<unknown, [number]>(`UPDATE spend_nonces SET expires_at = ${deadKeepUntil} WHERE expires_at > ${deadKeepUntil}`);
  const releaseBriefly = brieflyLocked(
    sqlite,
    sqlite.transaction((commitment: string, nonce: string, nowMs: number) => {
      if (restore.run(commitment, nonce, skewS, nowMs).changes === 0) remove.run(commitment, nonce);
    }),
  );
  const recordOne = (commitment: string, nonce: string, keepUntilMs: number): Recorded | null => {
    // Also a replacement when the dead authorization's record has been pruned (it expired).
    if (insert.run(commitment, nonce, keepUntilMs).changes === 1) return deadRow.get(commitment, nonce) === null ? "new" : "replacing";
    return retake.run(commitment, nonce, skewS, keepUntilMs).changes === 1 ? "replacing" : null;
  };
  const record = brieflyLocked(sqlite, sqlite.transaction(recordOne));
  const recordAll = brieflyLocked(
    sqlite,
    sqlite.transaction((records: NonceRecord[]) => records.map((r) => recordOne(r.commitment, r.nonce, r.keepUntilMs))),
  );
  const prune = brieflyLocked(sqlite, (nowMs: number) => expired.run(nowMs).changes);
  const forgetUnsettled = brieflyLocked(
    sqlite,
    sqlite.transaction(() => unsettled.run().changes + replacedUnwritten.run(skewS).changes),
  );
  // Committed when each call returns, as SQLite's statements are synchronous; async for Postgres' sake.
  return {
    record: async (commitment, nonce, keepUntilMs) => record(commitment, nonce, keepUntilMs),
    recordAll: async (records) => recordAll(records),
    release: async (commitment, nonce, nowMs) => {
      try {
        releaseBriefly(commitment, nonce, nowMs);
      } catch {
        // Refused (locked elsewhere): the record stays until its expiry, and this signed
        // authorization cannot be sent again; the client signs a new one.
      }
    },
    prune: async (nowMs) => prune(nowMs),
    forgetUnsettled: async () => forgetUnsettled(),
  };
}
