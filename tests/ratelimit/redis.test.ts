/**
 * The Redis limiter against a real redis-server: the same decisions as the in-memory one (the
 * clock injected into both), exact under a concurrent burst from several clients, keys that
 * expire, and a refusal (never an allowance) when Redis cannot be asked.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createMemoryLimiter } from "../../src/ratelimit/memory";
import { createRedisLimiter } from "../../src/ratelimit/redis";
import { createRedisLink, RedisUnavailable } from "../../src/cluster/redis";
import { MINUTE_MS, DAY_MS, type RatePolicy } from "../../src/ratelimit/types";
import { startRedis, type RunningRedis } from "../support/redis";

let redis: RunningRedis;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const perMinute: RatePolicy = { limit: 60, periodMs: MINUTE_MS };
const anonymous: RatePolicy = { limit: 10, periodMs: MINUTE_MS, window: { limit: 5, ms: DAY_MS } };

describe("Redis limiter", () => {
  test("decides as the in-memory limiter does, step for step", async () => {
    let t = 1_000_000;
    const now = (): number => t;
    const link = createRedisLink(redis.url, { timeoutMs: 2_000 });
    await link.ready();
    const shared = createRedisLimiter(link, { now, prefix: `same-${crypto.randomUUID()}:` });
    const memory = createMemoryLimiter({ now });
    const steps: Array<[number, RatePolicy, "take" | "back" | "charge"]> = [
      ...Array.from({ length: 7 }, () => [0, anonymous, "take"] as [number, RatePolicy, "take"]),
      [30_000, anonymous, "take"],
      [0, anonymous, "back"],
      [0, anonymous, "take"],
      [DAY_MS, anonymous, "take"],
      [0, perMinute, "take"],
      [0, perMinute, "charge"],
      [500, perMinute, "take"],
      [120_000, perMinute, "take"],
    ];
    for (const [advance, policy, op] of steps) {
      t += advance;
      const subject = policy === anonymous ? "ip:1" : "key:1";
      if (op === "take") {
        const expected = memory.take(subject, policy);
        expect(await shared.take(subject, policy)).toEqual(expected);
      } else if (op === "back") {
        memory.giveBack(subject, policy);
        shared.giveBack(subject, policy);
      } else {
        memory.charge(subject, policy, 90);
        shared.charge(subject, policy, 90);
      }
    }
    link.close();
  });

  test("a burst of 1,000 from three clients lets exactly 60 through", async () => {
    const links = [0, 1, 2].map(() => createRedisLink(redis.url, { timeoutMs: 5_000 }));
    await Promise.all(links.map((l) => l.ready()));
    // One instant for the whole burst: on a loaded machine it may take longer than the second a token takes to refill.
    const limiters = links.map((l) => createRedisLimiter(l, { now: () => 5_000_000 }));
    const subject = `key:${crypto.randomUUID()}`;
    const decisions = await Promise.all(Array.from({ length: 1_000 }, (_, i) => limiters[i % 3].take(subject, perMinute)));
    expect(decisions.filter((d) => d.allowed).length).toBe(60);
    for (const link of links) link.close();
  });

  test("a subject's key expires when its bucket would be full again", async () => {
    const link = createRedisLink(redis.url, { timeoutMs: 2_000 });
    await link.ready();
    const limiter = createRedisLimiter(link, { prefix: "ttl:" });
    await limiter.take("a", { limit: 60, periodMs: MINUTE_MS });
    const client = await redis.client();
    const ttl = Number(await client.send("PTTL", ["ttl:a"]));
    // One request out of 60 per minute comes back in a second.
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(1_000);
    link.close();
  });

  test("Redis unreachable: take() rejects, it never allows; the link keeps dialing without unhandled rejections", async () => {
    const unhandled: unknown[] = [];
    const note = (reason: unknown): void => void unhandled.push(reason);
    process.on("unhandledRejection", note);
    const link = createRedisLink("redis://127.0.0.1:1", { timeoutMs: 200 });
    await link.ready().catch(() => {});
    const limiter = createRedisLimiter(link);
    await expect(limiter.take("key:x", perMinute)).rejects.toBeInstanceOf(RedisUnavailable);
    expect(link.status().connected).toBe(false);
    // Long enough for the link to dial again a few times (every 250 ms) and fail each time.
    await Bun.sleep(800);
    link.close();
    process.off("unhandledRejection", note);
    expect(unhandled).toEqual([]);
  });
});
