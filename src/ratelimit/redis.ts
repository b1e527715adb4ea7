/**
 * The rate limiter over Redis, for replicas that must share their limits: the same token bucket
 * and window as ./memory.ts, evaluated by one Lua script per take, so Redis runs each decision
 * whole, one after another, and a burst spread over any number of replicas is counted exactly.
 * A take is one EVALSHA (EVAL once, when Redis has not seen the script); the client pipelines the
 * takes a request makes in one event-loop turn into one round trip.
 *
 * Each subject is one hash, `mg:rl:<subject>`, that expires when it would decide like a missing
 * one (its bucket full again and its window closed), so Redis holds only subjects still limited.
 * Time is Redis's own clock (TIME in the script), the same for every replica; an injected `now`
 * replaces it, for tests. When Redis cannot answer, take() rejects (RedisUnavailable) and the
 * caller refuses the request: limits never fail open. giveBack() and charge() are sent without
 * waiting; one lost to an outage leaves the bucket tighter, never looser.
 */
import type { Decided, RateDecision, RateLimiter, RatePolicy } from "./types";

/** What the limiter needs of a Redis connection (../cluster/redis.ts RedisLink has it). */
export interface RedisCommands {
  send(command: string, args: string[]): Promise<unknown>;
}

export interface RedisLimiterOptions {
  /** Epoch ms; Redis's own clock when absent. */
  now?: () => number;
  /** Prefix of every key (default `mg:rl:`). */
  prefix?: string;
}

// ARGV: op (take | charge | back), limit, periodMs, window limit (0: none), window ms, now ("" for
// Redis's clock), amount. Returns { allowed, tokens, window start, window count, now } (numbers as
// strings: Redis would cut a Lua number to an integer).
const SCRIPT = `
local op = ARGV[1]
local limit = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local wlimit = tonumber(ARGV[4])
local wms = tonumber(ARGV[5])
local now = tonumber(ARGV[6])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
local rate = limit / period
local h = redis.call('HMGET', KEYS[1], 'k', 'a', 'ws', 'wc')
if op == 'back' and not h[1] then return {0, '0', '-1', 0, '0'} end
local tokens = limit
local at = now
if h[1] then tokens = tonumber(h[1]); at = tonumber(h[2]) end
local ws = tonumber(h[3]) or -1
local wc = tonumber(h[4]) or 0
tokens = math.min(limit, tokens + math.max(0, now - at) * rate)
local allowed = 0
if op == 'take' then
  local windowOk = true
  if wlimit > 0 then
    if ws < 0 or now - ws >= wms then ws = now; wc = 0 end
    windowOk = wc < wlimit
  end
  if tokens >= 1 and windowOk then
    allowed = 1
    tokens = tokens - 1
    if wlimit > 0 then wc = wc + 1 end
  end
elseif op == 'charge' then
  tokens = tokens - tonumber(ARGV[7])
else
  tokens = math.min(limit, tokens + 1)
  if wlimit > 0 and wc > 0 then wc = wc - 1 end
end
local ttl = math.ceil((limit - tokens) / rate)
if wlimit > 0 and ws >= 0 then ttl = math.max(ttl, math.ceil(ws + wms - now)) end
local f = '%.17g'
if ttl < 1 then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'k', string.format(f, tokens), 'a', string.format(f, now), 'ws', string.format(f, ws), 'wc', wc)
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return {allowed, string.format(f, tokens), string.format(f, ws), wc, string.format(f, now)}
`;

/** The SHA-1 Redis names the script by (EVALSHA). */
const SCRIPT_SHA = new Bun.CryptoHasher("sha1").update(SCRIPT).digest("hex");

type Reply = [number, string, string, number, string];

/** The decision a script reply describes: the same numbers ./memory.ts gives. */
function decisionFrom(reply: Reply, policy: RatePolicy): RateDecision {
  const allowed = reply[0] === 1;
  const tokens = Number(reply[1]);
  const t = Number(reply[4]);
  const rate = policy.limit / policy.periodMs;
  const bucketOk = allowed || tokens >= 1;
  const bucketRemaining = Math.floor(tokens);
  const bucket: RateDecision = {
    allowed,
    binding: "bucket",
    limit: policy.limit,
    remaining: bucketRemaining,
    resetMs: (policy.limit - tokens) / rate,
    retryAfterMs: bucketOk ? 0 : (1 - tokens) / rate,
  };
  const window = policy.window;
  if (window === undefined) return bucket;
  const windowStart = Number(reply[2]);
  const windowCount = Number(reply[3]);
  const windowOk = allowed || windowCount < window.limit;
  const windowRemaining = window.limit - windowCount;
  const windowReset = windowStart + window.ms - t;
  if (windowOk && windowRemaining > bucketRemaining) return bucket;
  return {
    allowed,
    binding: "window",
    limit: window.limit,
    remaining: windowRemaining,
    resetMs: windowReset,
    retryAfterMs: Math.max(bucket.retryAfterMs, windowOk ? 0 : windowReset),
  };
}

export function createRedisLimiter(redis: RedisCommands, options: RedisLimiterOptions = {}): RateLimiter {
  const prefix = options.prefix ?? "mg:rl:";
  const now = options.now;

  function run(op: "take" | "charge" | "back", subject: string, policy: RatePolicy, amount = 0): Promise<Reply> {
    const args = [
      prefix + subject,
      op,
      String(policy.limit),
      String(policy.periodMs),
      String(policy.window?.limit ?? 0),
      String(policy.window?.ms ?? 0),
      now === undefined ? "" : String(now()),
      String(amount),
    ];
    return redis.send("EVALSHA", [SCRIPT_SHA, "1", ...args]).catch((error: unknown) => {
      // Redis forgets scripts on a restart (SCRIPT FLUSH too): sent whole once, it is cached again.
      if (!String((error as Error)?.message).includes("NOSCRIPT")) throw error;
      return redis.send("EVAL", [SCRIPT, "1", ...args]);
    }) as Promise<Reply>;
  }

  const ignore = (): void => {};

  return {
    take(subject, policy): Decided {
      return run("take", subject, policy).then((reply) => decisionFrom(reply, policy));
    },
    charge(subject, policy, amount) {
      if (amount > 0) run("charge", subject, policy, amount).catch(ignore);
    },
    giveBack(subject, policy) {
      run("back", subject, policy).catch(ignore);
    },
    // Held in Redis, not in this process; expiry keeps Redis bounded.
    size: () => 0,
    sweep: ignore,
    close: ignore,
  };
}
