/**
 * The CLI's argv parsing and expiry parsing, without a binary (tests/auth/e2e.test.ts runs the
 * commands themselves against a running server).
 */
import { describe, expect, test } from "bun:test";
import { parseArgs, UsageError } from "../../src/cli/args";
import { parseExpiry } from "../../src/cli/users";

describe("parseArgs", () => {
  test("positionals, --flag value, --flag=value and declared booleans", () => {
    const args = parseArgs(["key", "create", "--user", "a@example.com", "--name=ci", "--admin", "x"], new Set(["admin"]));
    expect(args.positionals).toEqual(["key", "create", "x"]);
    expect(Object.fromEntries(args.flags)).toEqual({ user: "a@example.com", name: "ci", admin: true });
  });

  test("a flag is never taken as the value of the flag before it (regression: --name --config x named a key \"--config\")", () => {
    expect(() => parseArgs(["key", "create", "--name", "--config", "mg.toml"])).toThrow(new UsageError("--name needs a value"));
    expect(() => parseArgs(["--name"])).toThrow(new UsageError("--name needs a value"));
    expect(parseArgs(["--name=--odd"]).flags.get("name")).toBe("--odd");
  });
});

describe("parseExpiry", () => {
  const now = Date.UTC(2026, 10, 22, 12);

  test("durations and dates", () => {
    expect(parseExpiry("30d", now)).toBe(now + 30 * 86_400_000);
    expect(parseExpiry("90m", now)).toBe(now + 90 * 60_000);
    expect(parseExpiry("2w", now)).toBe(now + 14 * 86_400_000);
    expect(parseExpiry("2027-01-01", now)).toBe(Date.UTC(2027, 0, 1));
  });

  test("refused: a zero duration (regression: 0d made a key that had already expired), the past, nonsense", () => {
    for (const text of ["0d", "0m", "000h", "2026-01-01", "-5d", "1.5d", "soon", ""]) {
      expect(() => parseExpiry(text, now)).toThrow(UsageError);
    }
  });
});
