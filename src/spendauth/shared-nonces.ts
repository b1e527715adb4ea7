/**
 * SpendAuth's replay records kept in Redis as well as in SQLite (`[cluster] redis_url`), so that a
 * header replayed to another replica is refused even by a replica that does not see this one's
 * database writes (or has just forgotten its own unsettled records at start-up). Each
 * (commitment, nonce) is one key, set only if absent and expiring at the authorization's keep-until
 * (its expiry plus the skew allowance), when the time check refuses it anyway.
 * A replacement of a dead authorization (./nonces.ts "replacing", judged by SQLite) moves the key's
 * keep-until on only when later, in one script, so of two replacements one wins here too.
 */
import type { RedisCommands } from "../ratelimit/redis";

export interface SharedNonceClaim {
  commitment: string;
  nonce: string;
  keepUntilMs: number;
  replacing: boolean;
}

export interface SharedNonces {
  /** true: this request holds the record now; false: another holds it (a replay). Rejects when Redis cannot be asked. */
  claim(claim: SharedNonceClaim): Promise<boolean>;
  /** Gives the record back (nothing was served on it); a replacement's is left to expire. */
  release(claim: SharedNonceClaim): void;
}

const REPLACE = `
local held = redis.call('GET', KEYS[1])
if held and tonumber(held) >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[1])
return 1
`;

export function createSharedNonces(redis: RedisCommands, options: { prefix?: string } = {}): SharedNonces {
  const prefix = options.prefix ?? "mg:nonce:";
  const keyOf = (claim: SharedNonceClaim): string => `${prefix}${claim.commitment.toLowerCase()}:${claim.nonce}`;
  return {
    async claim(claim) {
      const keepUntil = String(claim.keepUntilMs);
      if (claim.replacing) return (await redis.send("EVAL", [REPLACE, "1", keyOf(claim), keepUntil])) === 1;
      return (await redis.send("SET", [keyOf(claim), keepUntil, "NX", "PXAT", keepUntil])) === "OK";
    },
    release(claim) {
      if (!claim.replacing) redis.send("DEL", [keyOf(claim)]).catch(() => {});
    },
  };
}
