/**
 * The sign-in throttle's memory under a flood: addresses and typed emails cost nothing to make up,
 * so a flood of them must not push an existing account's count out and hand its guesser fresh
 * attempts (regression: 420,000 cheap posts, 5 per made-up email, reset a locked account).
 */
import { describe, expect, test } from "bun:test";
import { createSignInThrottle } from "../../src/auth/throttle";

describe("sign-in throttle under a flood", () => {
  test("made-up addresses and emails, each used up, do not push out an existing account's or a device's count", () => {
    let now = Date.UTC(2026, 5, 16);
    const throttle = createSignInThrottle({ now: () => now });
    const victim = { account: "victim@example.com", accountId: 7 };
    const guesses = Array.from({ length: 6 }, (_, i) => throttle.attempt({ address: `192.0.2.${i}`, ...victim }));
    expect(guesses.map((wait) => wait === null)).toEqual([true, true, true, true, true, false]);
    // The owner's browser, at the limit too.
    for (let i = 0; i < 5; i++) throttle.attempt({ address: "198.51.100.1", ...victim, device: "7:nonce" });
    now += 1_000;
    // 25,000 made-up addresses, each spending all its 20 attempts on 4 made-up emails, 5 each: 125,000
    // subjects, every one of them refusing, so the oldest would go first.
    for (let i = 0; i < 25_000; i++) {
      const address = `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
      for (let j = 0; j < 20; j++) throttle.attempt({ address, account: `flood-${i}-${j % 4}@example.com` });
    }
    expect(throttle.attempt({ address: "203.0.113.9", ...victim })).not.toBeNull();
    expect(throttle.attempt({ address: "203.0.113.9", ...victim, device: "7:nonce" })).not.toBeNull();
    throttle.close();
  });
});
