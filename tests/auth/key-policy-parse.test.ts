// The key policy's text (the CLI's flags and the dashboard's fields) and what it compiles to:
// globs on ids and aliases, UTC calendar periods, address blocks.
import { describe, expect, test } from "bun:test";
import { budgetPeriod, compilePolicy, describePolicy, parsePolicyFlags, type PolicyColumns } from "../../src/auth/key-policy";

const NONE: PolicyColumns = { perMinute: null, models: null, budgetMicro: null, budgetPeriod: null, tokensPerMinute: null, allowIps: null };

describe("parsePolicyFlags", () => {
  test("each flag's text becomes its columns; an empty value clears; absent flags change nothing", () => {
    expect(
      parsePolicyFlags({
        models: " llama*, qwen3:* ,",
        budget: "0.5/week",
        perMinute: "30",
        tokensPerMinute: "20000",
        allowIp: "10.0.0.0/8, ::FFFF:192.168.1.7",
      }),
    ).toEqual({
      models: "llama*,qwen3:*",
      budgetMicro: 500_000,
      budgetPeriod: "week",
      perMinute: 30,
      tokensPerMinute: 20_000,
      allowIps: "10.0.0.0/8,192.168.1.7",
    });
    expect(parsePolicyFlags({ models: "", budget: "", perMinute: "", allowIp: "" })).toEqual({
      models: null,
      budgetMicro: null,
      budgetPeriod: null,
      perMinute: null,
      allowIps: null,
    });
    expect(parsePolicyFlags({})).toEqual({});
    expect(parsePolicyFlags({ models: "*" })).toEqual({ models: "*" });
  });

  test("malformed values are refused with a message naming the flag", () => {
    for (const [flags, flag] of [
      [{ budget: "5/fortnight" }, "--budget"],
      [{ budget: "5" }, "--budget"],
      [{ budget: "0/day" }, "--budget"],
      [{ budget: "5/day/x" }, "--budget"],
      [{ allowIp: "10.0.0.0/33" }, "--allow-ip"],
      [{ allowIp: "fd00::/129" }, "--allow-ip"],
      [{ allowIp: "localhost" }, "--allow-ip"],
      [{ perMinute: "0" }, "--per-minute"],
      [{ tokensPerMinute: "1e3" }, "--tokens-per-minute"],
      [{ models: "a b" }, "--models"],
    ] as const) {
      const result = parsePolicyFlags(flags);
      expect("error" in result && result.error.startsWith(flag)).toBe(true);
    }
  });
});

describe("compilePolicy", () => {
  test("nothing set compiles to nothing to check", () => {
    expect(compilePolicy(NONE)).toBeNull();
  });

  test("globs match a route's id or any alias, whole, with * over any characters and the rest literal", () => {
    const allows = compilePolicy({ ...NONE, models: "llama*,qwen3:*,exact.model" })!.allowsModel!;
    expect(allows({ id: "llama3.1:8b", aliases: [] })).toBe(true);
    expect(allows({ id: "meta/llama", aliases: [] })).toBe(false);
    expect(allows({ id: "big", aliases: ["qwen3:32b"] })).toBe(true);
    expect(allows({ id: "qwen2:7b", aliases: [] })).toBe(false);
    expect(allows({ id: "exactXmodel", aliases: [] })).toBe(false);
    expect(compilePolicy({ ...NONE, models: "*" })!.allowsModel!({ id: "anything/at:all", aliases: [] })).toBe(true);
  });

  test("addresses: blocks and single addresses, IPv4 and IPv6", () => {
    const allows = compilePolicy({ ...NONE, allowIps: "10.0.0.0/8,192.168.1.7,fd00::/8" })!.allowsAddress!;
    expect(["10.255.0.1", "192.168.1.7", "fd12::1"].map(allows)).toEqual([true, true, true]);
    expect(["11.0.0.1", "192.168.1.8", "2001:db8::1", "not-an-address"].map(allows)).toEqual([false, false, false, false]);
  });
});

test("budget periods are UTC calendar periods: a week starts on Monday, a month on its 1st, total never resets", () => {
  const sunday = Date.UTC(2026, 10, 29, 23, 59);
  expect(budgetPeriod("day", sunday)).toEqual({ start: Date.UTC(2026, 10, 29), resetsAt: Date.UTC(2026, 10, 30) });
  expect(budgetPeriod("week", sunday)).toEqual({ start: Date.UTC(2026, 10, 23), resetsAt: Date.UTC(2026, 10, 30) });
  expect(budgetPeriod("week", Date.UTC(2026, 10, 30))).toEqual({ start: Date.UTC(2026, 10, 30), resetsAt: Date.UTC(2026, 11, 7) });
  expect(budgetPeriod("month", Date.UTC(2026, 11, 31, 12))).toEqual({ start: Date.UTC(2026, 11, 1), resetsAt: Date.UTC(2027, 0, 1) });
  expect(budgetPeriod("total", sunday)).toEqual({ start: 0, resetsAt: null });
});

test("describePolicy is one line, as key list and the dashboard show it", () => {
  expect(describePolicy(NONE)).toBe("-");
  expect(
    describePolicy({ perMinute: 30, models: "llama*", budgetMicro: 1_000_000, budgetPeriod: "day", tokensPerMinute: 20_000, allowIps: "10.0.0.0/8" }),
  ).toBe("models llama*; budget 1.000000/day; 30 req/min; 20000 tokens/min; from 10.0.0.0/8");
});
