/**
 * The API key check on Postgres (./key-verifier.ts makes it for a Postgres handle): the same
 * caches as on SQLite, kept true by polling, every PG_CHANGE_POLL_MS, change_counters' `keys`
 * row, which triggers move with every change to a key or its owner's disabled state, whoever
 * makes it (another replica, the CLI, psql): a change applies within that second plus one round
 * trip (at once with `[cluster] redis_url`). Balances and key spend, which other replicas debit,
 * are emptied at every poll. A read the cache misses is a promise.
 */
import type { SQL } from "bun";
import type { Db } from "../db/client";
import { getBalance, keySpendSince, storedBalanceCache, storedKeySpendCache } from "../credits/ledger";
import { parseApiKey, verifiedKeyCache, type KeyRow, type VerifiedKey } from "./apikey";
import { equalSecrets } from "./tokens";
import { judge, NOT_VALID, remember, verifiedFrom, type KeyVerifier } from "./key-check";

const PG_CHANGE_POLL_MS = 1_000;

/** Postgres' bigint columns come back from Bun.sql as strings. */
const numberOrNull = (value: unknown): number | null => (value === null ? null : Number(value));

/**
 * The same caches on Postgres, kept true by the change counter's poll. A read is remembered only if
 * no poll emptied the caches while it was in flight (it may predate the change that did), and
 * concurrent misses of one key share one read.
 */
export function createPostgresKeyVerifier(db: Db, sql: SQL, now: () => number): KeyVerifier {
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
      return cached(balances, userId, getBalance(db, userId), spendGeneration).then((m) => m ?? 0);
    },
    readKeySpend(keyId, start) {
      const spent = keySpend.get(keyId);
      if (spent !== undefined && spent.start === start) return spent.micro;
      const read = Promise.resolve(keySpendSince(db, keyId, start)).then((micro) => ({ start, micro }));
      return cached(keySpend, keyId, read, spendGeneration).then((s) => s?.micro ?? 0);
    },
  };
}
