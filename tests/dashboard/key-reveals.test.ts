/**
 * A new key's one showing (src/dashboard/key-reveals.ts), with an injected clock: taken once, by
 * its own session only, within REVEAL_TTL_MS, and memory stays bounded.
 */
import { expect, test } from "bun:test";
import { createKeyReveals, REVEAL_TTL_MS } from "../../src/dashboard/key-reveals";

const KEY = { key: "sk-mg-example", name: "ci" };

test("a held key is taken once, by the session it was held for", () => {
  const reveals = createKeyReveals(() => 0);
  const id = reveals.hold("alice-csrf", KEY);
  expect(reveals.take(id, "bob-csrf")).toBeNull();
  expect(reveals.take(id, "alice-csrf")).toEqual(KEY);
  expect(reveals.take(id, "alice-csrf")).toBeNull();
  expect(reveals.take("no-such-id", "alice-csrf")).toBeNull();
});

test("a key not taken within REVEAL_TTL_MS is never shown", () => {
  let now = 1_000;
  const reveals = createKeyReveals(() => now);
  const late = reveals.hold("s", KEY);
  const inTime = reveals.hold("s", { ...KEY, name: "in time" });
  now += REVEAL_TTL_MS - 1;
  expect(reveals.take(inTime, "s")?.name).toBe("in time");
  now += 1;
  expect(reveals.take(late, "s")).toBeNull();
});

test("a session has at most 5 keys waiting: a loop pushes out its own, not another session's", () => {
  const reveals = createKeyReveals(() => 0);
  const other = reveals.hold("other", KEY);
  const ids = Array.from({ length: 8 }, (_, i) => reveals.hold("loop", { ...KEY, name: `k${i}` }));
  expect(ids.map((id) => reveals.take(id, "loop")?.name ?? null)).toEqual([null, null, null, "k3", "k4", "k5", "k6", "k7"]);
  expect(reveals.take(other, "other")).toEqual(KEY);
});

test("expired keys are dropped as new ones are held, and at most 1,000 are held", () => {
  let now = 0;
  const reveals = createKeyReveals(() => now);
  const first = reveals.hold("s0", KEY);
  const ids = Array.from({ length: 1_000 }, (_, i) => reveals.hold(`s${i + 1}`, { ...KEY, name: `k${i}` }));
  // The oldest made room for the thousandth-and-first; the rest are all still there.
  expect(reveals.take(first, "s0")).toBeNull();
  expect(reveals.take(ids[0], "s1")?.name).toBe("k0");
  expect(reveals.take(ids[999], "s1000")?.name).toBe("k999");
  now = REVEAL_TTL_MS;
  const fresh = reveals.hold("s", KEY);
  expect(reveals.take(ids[500], "s501")).toBeNull();
  expect(reveals.take(fresh, "s")).toEqual(KEY);
});
