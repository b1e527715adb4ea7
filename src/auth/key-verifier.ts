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
 * On Postgres the poll reads, every PG_CHANGE_POLL_MS, change_counters' `keys` row, which triggers
 * move with every change to a key or its owner's disabled state, whoever makes it (another replica,
 * the CLI, psql): a change applies within that second plus one round trip (at once with `[cluster]
 * redis_url`). Balances and key spend, which other replicas debit, are emptied at every poll.
 * There a read the cache misses is a promise.
 */
import type { SQL } from "bun";
import type { Db } from "../db/client";
import { postgresOf, sqliteOf } from "../db/engine";
import { keySpendSince, storedBalanceCache, storedKeySpendCache } from "../credits/ledger";
import { compilePolicy } from "./key-policy";
import { parseApiKey, verifiedKeyCache, type KeyDenial, type KeyRow, type VerifiedKey } from "./apikey";
import { equalSecrets } from "./tokens";

const CHANGE_POLL_MS = 50;
const PG_CHANGE_POLL_MS = 1_000;
/** Cached keys, and cached balances, before the cache is emptied. */
const MAX_KEYS = 10_000;

export interface KeyVerifier {
  /** The same VerifiedKey object for every request with the key, while it stays cached; a promise only when Postgres must be asked. */
  verify(key: string): VerifiedKey | KeyDenial | Promise<VerifiedKey | KeyDenial>;
  /** The owner's stored balance in micro-credits (0 without a row); a promise only when Postgres must be asked. */
  readBalance(userId: number): number | Promise<number>;
  /** What the key's stored debits took since `start` (its budget period's start), micro-credits; as readBalance. */
  readKeySpend(keyId: string, start: number): number | Promise<number>;
}

const NOT_VALID: KeyDenial = { ok: false, message: "The API key is not valid" };

function verifiedFrom(found: KeyRow): VerifiedKey {
  return {
    ok: true,
    row: found,
    policy: compilePolicy(found),
    identity: { kind: "api_key", userId: found.userId, keyId: found.id, subject: `key:${found.id}` },
  };
}

/** The key as it stands now: refused when revoked, expired or its owner disabled. */
function judge(verified: VerifiedKey, now: () => number): VerifiedKey | KeyDenial {
  const row = verified.row;
  if (row.revokedAt !== null) return { ok: false, message: "The API key has been revoked" };
  if (row.expiresAt !== null && row.expiresAt <= now()) {
    return { ok: false, message: `The API key expired at ${new Date(row.expiresAt).toISOString()}` };
  }
  if (row.disabledAt !== null) return { ok: false, message: "The account that owns this API key is disabled" };
  return verified;
}

function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  if (map.size >= MAX_KEYS) map.clear();
  map.set(key, value);
}

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

/** Postgres' bigint columns come back from Bun.sql as strings. */
const numberOrNull = (value: unknown): number | null => (value === null ? null : Number(value));

/**
 * The same caches on Postgres, kept true by the change counter's poll. A read is remembered only if
 * no poll emptied the caches while it was in flight (it may predate the change that did), and
 * concurrent misses of one key share one read.
 */
function createPostgresKeyVerifier(db: Db, sql: SQL, now: () => number): KeyVerifier {
  const known = verifiedKeyCache(db);
  const balances = storedBalanceCache(db);
  const keySpend = storedKeySpendCache(db);
  const reading = new Map<string, Promise<VerifiedKey | null>>();
  /** The counter as last read; null until the first poll has read it (nothing is kept before). */
  let version: number | null = null;
  /** Bumped when the keys are emptied, and when balances and key spend are (every poll). */
  let keysEmptied = 0;
  let spendEmptied = 0;
  let polling = false;
  const forgetKeys = (): void => {
    known.clear();
    keysEmptied += 1;
  };
  const forgetSpend = (): void => {
    balances.clear();
    keySpend.clear();
    spendEmptied += 1;
  };
  const pollOnce = async (): Promise<void> => {
    if (polling) return;
    polling = true;
    try {
      const [row] = (await sql`SELECT version FROM change_counters WHERE name = 'keys'`) as { version: string }[];
      const current = row === undefined ? 0 : Number(row.version);
      if (version !== null && current !== version) forgetKeys();
      version = current;
      forgetSpend();
    } catch (err) {
      // The pool closed: the process is stopping. Anything else: nothing kept is trusted, as on SQLite.
      if ((err as { code?: unknown }).code === "ERR_POSTGRES_CONNECTION_CLOSED") clearInterval(poll);
      else {
        forgetKeys();
        forgetSpend();
      }
    } finally {
      polling = false;
    }
  };
  const poll = setInterval(pollOnce, PG_CHANGE_POLL_MS);
  poll.unref();
  void pollOnce();

  const readKey = async (hash: string): Promise<VerifiedKey | null> => {
    const [found] = (await sql`
      SELECT k.id, k.user_id, k.key_hash, k.per_minute, k.models, k.budget_micro, k.budget_period, k.tokens_per_minute,
             k.allow_ips, k.expires_at, k.revoked_at, u.disabled_at
        FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.key_hash = ${hash}`) as Record<string, unknown>[];
    if (found === undefined || !equalSecrets(found.key_hash as string, hash)) return null;
    return verifiedFrom({
      id: found.id as string,
      userId: Number(found.user_id),
      keyHash: found.key_hash as string,
      perMinute: numberOrNull(found.per_minute),
      models: found.models as string | null,
      budgetMicro: numberOrNull(found.budget_micro),
      budgetPeriod: found.budget_period as KeyRow["budgetPeriod"],
      tokensPerMinute: numberOrNull(found.tokens_per_minute),
      allowIps: found.allow_ips as string | null,
      expiresAt: numberOrNull(found.expires_at),
      revokedAt: numberOrNull(found.revoked_at),
      disabledAt: numberOrNull(found.disabled_at),
    });
  };
  /**
   * Awaits `read` and keeps a found answer in `map` under `key`, unless `emptied()` moved while it
   * was in flight (the read may predate the change that emptied it) or no poll has read the
   * counter yet (a change before that read would never be noticed).
   */
  const cached = async <K, V>(map: Map<K, V>, key: K, read: Promise<V | null>, emptied: () => number): Promise<V | null> => {
    const before = version === null ? -1 : emptied();
    const value = await read;
    if (value !== null && emptied() === before) remember(map, key, value);
    return value;
  };
  const keysGeneration = (): number => keysEmptied;
  const spendGeneration = (): number => spendEmptied;

  return {
    verify(key) {
      const parsed = parseApiKey(key);
      if (!parsed.ok) return parsed;
      const verified = known.get(parsed.hash);
      if (verified !== undefined) return judge(verified, now);
      let read = reading.get(parsed.hash);
      if (read === undefined) {
        const hash = parsed.hash;
        reading.set(hash, (read = cached(known, hash, readKey(hash), keysGeneration).finally(() => reading.delete(hash))));
      }
      return read.then((found) => (found === null ? NOT_VALID : judge(found, now)));
    },
    readBalance(userId) {
      const micro = balances.get(userId);
      if (micro !== undefined) return micro;
      const read = sql`SELECT micro FROM balances WHERE user_id = ${userId}`.then((rows: { micro: string }[]) => Number(rows[0]?.micro ?? 0));
      return cached(balances, userId, read, spendGeneration).then((m) => m ?? 0);
    },
    readKeySpend(keyId, start) {
      const spent = keySpend.get(keyId);
      if (spent !== undefined && spent.start === start) return spent.micro;
      const read = Promise.resolve(keySpendSince(db, keyId, start)).then((micro) => ({ start, micro }));
      return cached(keySpend, keyId, read, spendGeneration).then((s) => s?.micro ?? 0);
    },
  };
}
