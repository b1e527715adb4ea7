/**
 * Changing a key after it is made: its policy (`key update`, the dashboard's edit form), and
 * finding a key by its id or by the key itself (a leaked key pasted into `key revoke` is looked up
 * by its SHA-256, never echoed back). Every change empties the request path's key cache in this
 * process; other processes see it through the verifier's data_version poll (./key-verifier.ts),
 * so a policy applies from the next request everywhere, without a restart.
 *
 *   resolveKeyId(db, idOrKey)  -> the key's id, or null (unknown, or a malformed key)
 *   updateKeyPolicy(db, keyId, change, { userId? }) -> "updated" | "not_found"
 *   activeKeyCount(db, userId) -> unrevoked keys the user holds (the `[limits] keys_per_user` cap)
 */
import { and, eq, isNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { apiKeys } from "../db/schema";
import { forgetVerifiedKeys, KEY_PREFIX, parseApiKey } from "./apikey";
import type { PolicyChange } from "./key-policy";

export function resolveKeyId(db: Db, idOrKey: string): string | null {
  if (!idOrKey.startsWith(KEY_PREFIX)) {
    const row = db.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.id, idOrKey)).get();
    return row?.id ?? null;
  }
  const parsed = parseApiKey(idOrKey);
  if (!parsed.ok) return null;
  const row = db.select({ id: apiKeys.id }).from(apiKeys).where(eq(apiKeys.keyHash, parsed.hash)).get();
  return row?.id ?? null;
}

/** With `userId`, only that user's key (the dashboard's own keys); without, any (an admin, the CLI). */
export function updateKeyPolicy(db: Db, keyId: string, change: PolicyChange, options: { userId?: number } = {}): "updated" | "not_found" {
  const owned = options.userId === undefined ? eq(apiKeys.id, keyId) : and(eq(apiKeys.id, keyId), eq(apiKeys.userId, options.userId));
  const row = db.select({ id: apiKeys.id }).from(apiKeys).where(owned).get();
  if (!row) return "not_found";
  if (Object.keys(change).length > 0) db.update(apiKeys).set(change).where(owned).run();
  forgetVerifiedKeys(db);
  return "updated";
}

export function activeKeyCount(db: Db, userId: number): number {
  const row = db
    .select({ n: sql<number>`count(*)` })
    .from(apiKeys)
    .where(and(eq(apiKeys.userId, userId), isNull(apiKeys.revokedAt)))
    .get();
  return row?.n ?? 0;
}
