/**
 * SpendAuth's replay records on Postgres: the same statements as ./nonces.ts on SQLite, as Bun.sql
 * templates. The primary key (commitment, nonce) decides between replicas: of two inserts of one
 * record, the second waits for the first's commit and then finds it taken. A retake or a restore
 * is one UPDATE whose condition Postgres checks again on the row it locked, so of concurrent ones
 * the first moves the record on and the rest change nothing, as on SQLite.
 */
import type { SQL } from "bun";
import { EXPIRY_SKEW_S } from "./header";
import type { NonceRecord, NonceStore, Recorded } from "./nonce-store";
import { deadUnauthorized } from "./settlements";

const SKEW_S = Number(EXPIRY_SKEW_S);
/** The settlement row `s` went dead before its spend was authorized on-chain: its nonce is unused there. */
const DEAD_UNAUTHORIZED = deadUnauthorized("s");

export function createPostgresNonceStore(sql: SQL): NonceStore {
  /** The keep-until (ms) of the authorization in the settlement row of the record, null without one. */
  const rowKeepUntil = (commitment: string, nonce: string, options: { onlyDead?: boolean } = {}): SQL.Query<unknown> =>
    sql`(SELECT (s.expiry + ${SKEW_S}) * 1000 FROM settlements s WHERE s.commitment = ${commitment} AND s.nonce = ${nonce}
      ${options.onlyDead ? sql`AND ${sql.unsafe(DEAD_UNAUTHORIZED)}` : sql``})`;
  const recordOne = async (tx: SQL, r: NonceRecord): Promise<Recorded | null> => {
    const inserted =
      await tx`INSERT INTO spend_nonces (commitment, nonce, expires_at) VALUES (${r.commitment}, ${r.nonce}, ${r.keepUntilMs}) ON CONFLICT DO NOTHING`;
    if (inserted.count === 1) {
      // Also a replacement when the dead authorization's record has been pruned (it expired).
      const dead = await tx`SELECT 1 FROM settlements s WHERE s.commitment = ${r.commitment} AND s.nonce = ${r.nonce} AND ${tx.unsafe(DEAD_UNAUTHORIZED)}`;
      return dead.length === 0 ? "new" : "replacing";
    }
    const retaken = await tx`UPDATE spend_nonces SET expires_at = ${r.keepUntilMs}
      WHERE commitment = ${r.commitment} AND nonce = ${r.nonce} AND expires_at < ${r.keepUntilMs}
        AND expires_at <= ${rowKeepUntil(r.commitment, r.nonce, { onlyDead: true })}`;
    return retaken.count === 1 ? "replacing" : null;
  };
  const recordAll = (records: NonceRecord[]): Promise<Array<Recorded | null>> =>
    sql.begin(async (tx) => {
      const results: Array<Recorded | null> = [];
      for (const r of records) results.push(await recordOne(tx, r));
      return results;
    });
  return {
    record: async (commitment, nonce, keepUntilMs) => (await recordAll([{ commitment, nonce, keepUntilMs }]))[0]!,
    recordAll,
    async release(commitment, nonce, nowMs) {
      try {
        await sql.begin(async (tx) => {
          const keepUntil = rowKeepUntil(commitment, nonce);
          const restored =
            await tx`UPDATE spend_nonces SET expires_at = ${keepUntil} WHERE commitment = ${commitment} AND nonce = ${nonce} AND ${keepUntil} >= ${nowMs}`;
          if (restored.count === 0) await tx`DELETE FROM spend_nonces WHERE commitment = ${commitment} AND nonce = ${nonce}`;
        });
      } catch {
        // Refused: the record stays until its expiry, as on SQLite; the client signs a new one.
      }
    },
    async prune(nowMs) {
      return (await sql`DELETE FROM spend_nonces WHERE expires_at < ${nowMs}`).count;
    },
    forgetUnsettled: () =>
      sql.begin(async (tx) => {
        const forgotten =
          await tx`DELETE FROM spend_nonces n WHERE NOT EXISTS (SELECT 1 FROM settlements s WHERE s.commitment = n.commitment AND s.nonce = n.nonce)`;
        const deadKeepUntil = tx`(SELECT (s.expiry + ${SKEW_S}) * 1000 FROM settlements s
          WHERE s.commitment = n.commitment AND s.nonce = n.nonce AND ${tx.unsafe(DEAD_UNAUTHORIZED)})`;
        const returned = await tx`UPDATE spend_nonces n SET expires_at = ${deadKeepUntil} WHERE n.expires_at > ${deadKeepUntil}`;
        return forgotten.count + returned.count;
      }),
  };
}
