/**
 * The request-path check of a presented API key: format and checksum (no database), then the key
 * row by the key's SHA-256. Rows found are kept in memory with the identity their requests carry,
 * because one SQLite read on a WAL database costs more than everything else the gate does (~7 µs
 * of CPU in a running gateway, measured with `make bench`). What keeps the cache true:
 * - this process's own changes (revokeApiKey, updateKeyPolicy, disableUser, enableUser) call
 *   forgetVerifiedKeys, so a change in the dashboard applies to the very next request;
 * - another process's commits (the CLI, an admin's sqlite3) are noticed by polling SQLite's
 *   `PRAGMA data_version` every CHANGE_POLL_MS, so a revocation there applies within that time;
 *   a poll the database refuses empties the cache too, and polling goes on;
 * - expiry is compared on every request; unknown keys are never kept (guessing costs a read each
 *   time, as before) and the cache is emptied when it reaches MAX_KEYS.
 * A paid model's request needs the owner's stored balance (readBalance): it is kept the same way,
 * in the ledger's storedBalanceCache, which every balance change in this process (grants, refunds,
 * the meter's debit batches) updates by deleting the user's entry, and which the same poll empties.
 * A balance is thus one read per user per debit batch, not one per request. A key's spend in its
 * budget period (storedKeySpendCache) is summed once, added to as this process writes the key's
 * debits, emptied by the same poll, and summed again when the period turns.
 *
 * On Postgres the same caches are kept true by a change counter instead: ./key-verifier-pg.ts.
 * What both share (the interface, a row's judgement, the cache bound) is ./key-check.ts.
 */
import type { Db } from "../db/client";
import { postgresOf, sqliteOf } from "../db/engine";
import { keySpendSince, storedBalanceCache, storedKeySpendCache } from "../credits/ledger";
import { parseApiKey, verifiedKeyCache, type KeyRow } from "./apikey";
import { equalSecrets } from "./tokens";
import { judge, NOT_VALID, remember, verifiedFrom, type KeyVerifier } from "./key-check";
import { createPostgresKeyVerifier } from "./key-verifier-pg";

const CHANGE_POLL_MS = 50;

export function createKeyVerifier(db: Db, now: () => number): KeyVerifier {
  const pg = postgresOf(db);
  if (pg !== null) return createPostgresKeyVerifier(db, pg, now);
  const sqlite = sqliteOf(db, "the SQLite key check");
  const byHash = sqlite.query<KeyRow, [string]>(
    // A scalar subquery, not a join: the same index lookups, measured faster in SQLite.
    `SELECT k.id AS id, k.user_id AS userId, k.key_hash AS keyHash, k.per_minute AS perMinute,
            k.models AS models, k.budget_micro AS budgetMicro, k.budget_period AS budgetPeriod,
            k.tokens_per_minute AS tokensPerMinute, k.allow_ips AS allowIps, k.expires_at AS expiresAt, k.revoked_at AS revokedAt,
            (SELECT disabled_at FROM users WHERE id = k.user_id) AS disabledAt
       FROM api_keys k WHERE k.key_hash = ?`,
  );
  const balance = sqlite.query<{ micro: number }, [number]>("SELECT micro FROM balances WHERE user_id = ?");
  const dataVersion = sqlite.query<{ data_version: number }, []>("PRAGMA data_version");
  const known = verifiedKeyCache(db);
  const balances = storedBalanceCache(db);
  const keySpend = storedKeySpendCache(db);
  let version = dataVersion.get()!.data_version;
  const poll = setInterval(() => {
    try {
      const current = dataVersion.get()!.data_version;
      if (current !== version) {
        known.clear();
        balances.clear();
        keySpend.clear();
      }
      version = current;
    } catch (err) {
      // Closed ("Database has closed"): the process is stopping. Anything else (a read the database
      // refused): what changed meanwhile is unknown, so nothing kept is trusted, and the poll goes on.
      if (String((err as Error)?.message).includes("closed")) {
        clearInterval(poll);
      } else {
        known.clear();
        balances.clear();
        keySpend.clear();
      }
    }
  }, CHANGE_POLL_MS);
  poll.unref();

  return {
    verify(key) {
      const parsed = parseApiKey(key);
      if (!parsed.ok) return parsed;
      let verified = known.get(parsed.hash);
      if (verified === undefined) {
        const found = byHash.get(parsed.hash);
        if (found === null || !equalSecrets(found.keyHash, parsed.hash)) return NOT_VALID;
        remember(known, parsed.hash, (verified = verifiedFrom(found)));
      }
      return judge(verified, now);
    },
    readBalance(userId) {
      let micro = balances.get(userId);
      if (micro === undefined) remember(balances, userId, (micro = balance.get(userId)?.micro ?? 0));
      return micro;
    },
    readKeySpend(keyId, start) {
      let spent = keySpend.get(keyId);
      // The SQLite verifier: keySpendSince answers it synchronously.
      if (spent === undefined || spent.start !== start) remember(keySpend, keyId, (spent = { start, micro: keySpendSince(db, keyId, start) as number }));
      return spent.micro;
    },
  };
}
