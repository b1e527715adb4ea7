/**
 * Changing a key after it is made: its policy (`key update`, the dashboard's edit form), and
 * finding a key by its id or by the key itself (a leaked key pasted into `key revoke` is looked up
 * by its SHA-256, never echoed back). Every change empties the request path's key cache in this
 * process; other processes see it through the verifier's change poll (./key-verifier.ts), so a
 * policy applies from the next request everywhere, without a restart.
 *
 *   resolveKeyId(db, idOrKey)  -> the key's id, or null (unknown, or a malformed key)
 *   updateKeyPolicy(db, keyId, change, { userId? }) -> "updated" | "not_found"
 *   createKeyWithinCap(db, input, { keysPerUser }) -> the new key, or null when the user holds that many
 */
import { and, eq, isNull, sql } from "drizzle-orm";
import type { Db } from "../db/client";
import { postgresOf, tablesOf, transact } from "../db/engine";
import { createApiKey, forgetVerifiedKeys, KEY_PREFIX, parseApiKey, type CreatedKey } from "./apikey";
import type { PolicyChange } from "./key-policy";

export async function resolveKeyId(db: Db, idOrKey: string): Promise<string | null> {
  const { apiKeys } = tablesOf(db);
  let where = eq(apiKeys.id, idOrKey);
  if (idOrKey.startsWith(KEY_PREFIX)) {
    const parsed = parseApiKey(idOrKey);
    if (!parsed.ok) return null;
    where = eq(apiKeys.keyHash, parsed.hash);
  }
  const [row] = await db.select({ id: apiKeys.id }).from(apiKeys).where(where).limit(1);
  return row?.id ?? null;
}

/** With `userId`, only that user's key (the dashboard's own keys); without, any (an admin, the CLI). */
export async function updateKeyPolicy(db: Db, keyId: string, change: PolicyChange, options: { userId?: number } = {}): Promise<"updated" | "not_found"> {
  const { apiKeys } = tablesOf(db);
  const owned = options.userId === undefined ? eq(apiKeys.id, keyId) : and(eq(apiKeys.id, keyId), eq(apiKeys.userId, options.userId));
  const found =
    Object.keys(change).length > 0
      ? await db.update(apiKeys).set(change).where(owned).returning({ id: apiKeys.id })
      : await db.select({ id: apiKeys.id }).from(apiKeys).where(owned).limit(1);
  if (found.length === 0) return "not_found";
  forgetVerifiedKeys(db);
  return "updated";
}

/**
 * createApiKey unless the user already holds `keysPerUser` unrevoked keys (`[limits]
 * keys_per_user`). The count and the insert are one transaction that first locks the user's row
 * on Postgres (SQLite's transactions take the write lock up front), so creates racing on several
 * replicas or CLI runs cannot pass the cap together.
 */
export async function createKeyWithinCap(db: Db, input: Parameters<typeof createApiKey>[1], options: { keysPerUser: number }): Promise<CreatedKey | null> {
  return transact(db, async (tx) => {
    const { apiKeys } = tablesOf(tx);
    const pg = postgresOf(tx);
    if (pg !== null) await pg`SELECT 1 FROM users WHERE id = ${input.userId} FOR UPDATE`;
    const [row] = await tx
      .select({ n: sql<number>`count(*)` })
      .from(apiKeys)
      .where(and(eq(apiKeys.userId, input.userId), isNull(apiKeys.revokedAt)));
    if (Number(row?.n ?? 0) >= options.keysPerUser) return null;
    return createApiKey(tx, input);
  });
}
