/**
 * What the API key check is (KeyVerifier), and what its SQLite form (./key-verifier.ts) and its
 * Postgres form (./key-verifier-pg.ts) share: a found row made into the VerifiedKey every request
 * with the key carries, that key judged as it stands now, and the bound on what is kept.
 */
import { compilePolicy } from "./key-policy";
import type { KeyDenial, KeyRow, VerifiedKey } from "./apikey";

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

export const NOT_VALID: KeyDenial = { ok: false, message: "The API key is not valid" };

export function verifiedFrom(found: KeyRow): VerifiedKey {
  return {
    ok: true,
    row: found,
    policy: compilePolicy(found),
    identity: { kind: "api_key", userId: found.userId, keyId: found.id, subject: `key:${found.id}` },
  };
}

/** The key as it stands now: refused when revoked, expired or its owner disabled. */
export function judge(verified: VerifiedKey, now: () => number): VerifiedKey | KeyDenial {
  const row = verified.row;
  if (row.revokedAt !== null) return { ok: false, message: "The API key has been revoked" };
  if (row.expiresAt !== null && row.expiresAt <= now()) {
    return { ok: false, message: `The API key expired at ${new Date(row.expiresAt).toISOString()}` };
  }
  if (row.disabledAt !== null) return { ok: false, message: "The account that owns this API key is disabled" };
  return verified;
}

export function remember<K, V>(map: Map<K, V>, key: K, value: V): void {
  if (map.size >= MAX_KEYS) map.clear();
  map.set(key, value);
}
