/**
 * The CLI's argv parsing and expiry parsing, without a binary (tests/auth/e2e.test.ts runs the
 * commands themselves against a running server).
 */
import { describe, expect, spyOn, test } from "bun:test";
import { parseArgs, UsageError } from "../../src/cli/args";
import { runCli } from "../../src/cli/index";
import { existsSync, mkdtempSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseExpiry } from "../../src/cli/expiry";
import { formatTable } from "../../src/cli/table";
import { keyName } from "../../src/auth/apikey";
import { openDatabase } from "../../src/db/client";
import { migrations } from "../../src/db/migrations.gen";
import { createUser, findUserByEmail } from "../../src/auth/users";

/** A config file in a fresh directory, with its data_dir beside it. */
function freshConfig(): { config: string; dataDir: string } {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-cli-"));
  const config = join(dir, "modelgate.toml");
  const dataDir = join(dir, "data");
  writeFileSync(config, `[server]\ndata_dir = "${dataDir}"\n`);
  return { config, dataDir };
}

describe("jobs list --limit", () => {
  test('a limit past what SQLite takes is a usage error, not a database error (regression: 1e20 printed "datatype mismatch")', async () => {
    const { config } = freshConfig();
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      for (const limit of ["99999999999999999999", "0", "1.5", "abc", "0x10", "1e3", " 7"]) {
        expect(await runCli(["jobs", "list", "--limit", limit, "--config", config])).toBe(2);
        expect(String(error.mock.calls.at(-1)?.[0])).toContain("--limit must be a whole number from 1 to 1000000");
      }
    } finally {
      error.mockRestore();
    }
  });
});

describe("parseArgs", () => {
  test("positionals, --flag value, --flag=value and declared booleans", () => {
    const args = parseArgs(["key", "create", "--user", "a@example.com", "--name=ci", "--admin", "x"], new Set(["admin"]));
    expect(args.positionals).toEqual(["key", "create", "x"]);
    expect(Object.fromEntries(args.flags)).toEqual({ user: "a@example.com", name: "ci", admin: true });
  });

  test('a flag is never taken as the value of the flag before it (regression: --name --config x named a key "--config")', () => {
    expect(() => parseArgs(["key", "create", "--name", "--config", "mg.toml"])).toThrow(new UsageError("--name needs a value"));
    expect(() => parseArgs(["--name"])).toThrow(new UsageError("--name needs a value"));
    expect(parseArgs(["--name=--odd"]).flags.get("name")).toBe("--odd");
    // A flag no command takes is kept for the command's check to name (regression: `serve --bogus` said it needed a value).
    expect(parseArgs(["serve", "--bogus"], new Set(), new Set(["name"])).flags.get("bogus")).toBe(true);
    expect(() => parseArgs(["--name"], new Set(), new Set(["name"]))).toThrow(new UsageError("--name needs a value"));
  });

  test("a flag given twice is refused, not the last one taken (regression: --amount 5 --amount 6 granted 6)", () => {
    expect(() => parseArgs(["credits", "grant", "--amount", "5", "--amount", "6"])).toThrow(new UsageError("--amount is given twice"));
    expect(() => parseArgs(["--admin", "--admin"], new Set(["admin"]))).toThrow(new UsageError("--admin is given twice"));
    expect(() => parseArgs(["--user=a@x.io", "--user", "b@x.io"])).toThrow(new UsageError("--user is given twice"));
  });
});

describe("yes/no flags", () => {
  test("take no value: --admin=false is refused and makes no administrator (regression: it was read as --admin)", async () => {
    expect(() => parseArgs(["--admin=false"], new Set(["admin"]))).toThrow(new UsageError("--admin takes no value: give --admin alone, or leave it out"));
    const { config, dataDir } = freshConfig();
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      for (const flag of ["--admin=false", "--admin=0", "--admin="]) {
        expect(await runCli(["user", "add", "r@example.com", flag, "--config", config])).toBe(2);
      }
      expect(await runCli(["key", "list", "--json=false", "--config", config])).toBe(2);
      expect(String(error.mock.calls.at(-1)?.[0])).toBe("modelgate: --json takes no value: give --json alone, or leave it out");
    } finally {
      error.mockRestore();
    }
    expect(existsSync(dataDir)).toBe(false);
  });
});

describe("an account whose stored email is stuck", () => {
  test("is reached by its address as stored, as the start-up warning shows it (regression: `user disable` on it disabled the other account)", async () => {
    const { config, dataDir } = freshConfig();
    const opened = openDatabase(dataDir);
    await createUser(opened.db, { email: "ann@b\u00fccher.de" });
    // As an earlier release stored it: its lookup form, ann@bücher.de, belongs to the account above.
    opened.sqlite.run("INSERT INTO users (email, created_at, email_unverified) VALUES ('ann@xn--bcher-kva.de', 1, 0)");
    opened.close();
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "disable", "ann@xn--bcher-kva.de", "--config", config])).toBe(0);
    } finally {
      error.mockRestore();
    }
    const after = openDatabase(dataDir);
    const rows = after.sqlite.query("SELECT email, disabled_at IS NOT NULL AS disabled FROM users ORDER BY id").all();
    after.close();
    expect(rows).toEqual([
      { email: "ann@b\u00fccher.de", disabled: 0 },
      { email: "ann@xn--bcher-kva.de", disabled: 1 },
    ]);
  });
});

describe("user add --admin", () => {
  test("refuses an account made by a password sign-up (regression: the squatter's session became an administrator's); promotes a CLI-made one", async () => {
    const { config, dataDir } = freshConfig();
    const opened = openDatabase(dataDir);
    await createUser(opened.db, { email: "boss@example.com", password: "squatter pw", emailUnverified: true });
    await createUser(opened.db, { email: "made@example.com" });
    const error = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "Boss@example.com", "--admin", "--config", config])).toBe(2);
      expect(String(error.mock.calls.at(-1)?.[0])).toContain(
        "boss@example.com was made by a password sign-up, which does not prove the address; it is not made an administrator",
      );
      expect((await findUserByEmail(opened.db, "boss@example.com"))?.isAdmin).toBe(false);
      expect(await runCli(["user", "add", "made@example.com", "--admin", "--config", config])).toBe(0);
      expect((await findUserByEmail(opened.db, "made@example.com"))?.isAdmin).toBe(true);
      expect(String(printed.mock.calls.at(-1)?.[0])).toBe("made@example.com already existed; it is now an administrator");
      // Again: nothing to promote, and said so (regression: "it is now an administrator" a second time).
      expect(await runCli(["user", "add", "made@example.com", "--admin", "--config", config])).toBe(0);
      expect(String(printed.mock.calls.at(-1)?.[0])).toBe("made@example.com was already an administrator");
      // An operator who knows the owner vouches for the address; then it may become the administrator.
      expect(await runCli(["user", "verify", "boss@example.com", "--config", config])).toBe(0);
      expect(String(printed.mock.calls.at(-1)?.[0])).toContain("is now a proven address");
      expect(await runCli(["user", "verify", "boss@example.com", "--config", config])).toBe(0);
      expect(String(printed.mock.calls.at(-1)?.[0])).toContain("was already a proven address");
      expect(await runCli(["user", "add", "boss@example.com", "--admin", "--config", config])).toBe(0);
      expect((await findUserByEmail(opened.db, "boss@example.com"))?.isAdmin).toBe(true);
    } finally {
      error.mockRestore();
      printed.mockRestore();
      opened.close();
    }
  });
});

describe("key names and tables", () => {
  test("a key name cannot carry a line break or a terminal escape into `key list` (regression: a dashboard user forged a row owned by admin@)", async () => {
    const { config } = freshConfig();
    const quiet = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "pw@example.com", "--config", config])).toBe(0);
      const forged = "ok\nkey_aaaaaaaaaaaaaaaa  admin@example.com  prod \u001b[31mRED\u001b[0m\u200b";
      expect(await runCli(["key", "create", "--user", "pw@example.com", "--name", forged, "--config", config])).toBe(0);
      printed.mockClear();
      expect(await runCli(["key", "list", "--config", config])).toBe(0);
      const lines = printed.mock.calls.map((call) => String(call[0]));
      expect(lines).toHaveLength(2); // the header and the one key: no forged row
      expect(lines[1]).toContain("ok key_aaaaaaaaaaaaaaaa admin@example.com prod [31mRED [0m");
      for (const line of lines) expect(line).not.toMatch(/[\u0000-\u001f\u200b]/);
    } finally {
      quiet.mockRestore();
      printed.mockRestore();
    }
  });

  test('`key list` shows a key\'s policy, and a key whose owner is disabled as such (regression: "active" while the server refused it)', async () => {
    const { config } = freshConfig();
    const quiet = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      for (const email of ["on@example.com", "off@example.com"]) expect(await runCli(["user", "add", email, "--config", config])).toBe(0);
      expect(await runCli(["key", "create", "--user", "on@example.com", "--name", "fast", "--per-minute", "600", "--config", config])).toBe(0);
      expect(await runCli(["key", "create", "--user", "off@example.com", "--name", "idle", "--config", config])).toBe(0);
      expect(await runCli(["user", "disable", "off@example.com", "--config", config])).toBe(0);
      printed.mockClear();
      expect(await runCli(["key", "list", "--config", config])).toBe(0);
      const rows = printed.mock.calls.map((call) => String(call[0]).trim().split(/ {2,}/));
      expect(rows.map((row) => [row[2], row.at(-2), row.at(-1)]).sort()).toEqual([
        ["NAME", "STATUS", "POLICY"],
        ["fast", "active", "600 req/min"],
        ["idle", "owner disabled", "-"],
      ]);
    } finally {
      quiet.mockRestore();
      printed.mockRestore();
    }
  });

  test("a key name over 100 characters is refused, as the dashboard refuses it (regression: the CLI cut it to 100)", async () => {
    const { config } = freshConfig();
    const errors = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "long@example.com", "--config", config])).toBe(0);
      expect(await runCli(["key", "create", "--user", "long@example.com", "--name", "✓".repeat(101), "--config", config])).toBe(2);
      expect(errors.mock.calls.map((call) => String(call[0]))).toContain("modelgate: --name: at most 100 characters");
      expect(await runCli(["key", "create", "--user", "long@example.com", "--name", "✓".repeat(100), "--config", config])).toBe(0);
      printed.mockClear();
      expect(await runCli(["key", "list", "--json", "--config", config])).toBe(0);
      const keys = JSON.parse(String(printed.mock.calls[0][0])) as Array<{ name: string }>;
      expect(keys.map((k) => k.name)).toEqual(["✓".repeat(100)]);
    } finally {
      errors.mockRestore();
      printed.mockRestore();
    }
  });

  test("`settlements list` is a table like the others: aligned, an RPC node's error escaped (regression: tab-separated and raw, a forged row)", async () => {
    const { config, dataDir } = freshConfig();
    const opened = openDatabase(dataDir);
    opened.sqlite.run(
      "INSERT INTO settlements (commitment, nonce, amount, expiry, authorization, request_id, created_at, state, attempts, last_error) VALUES (?, '7', '5000', 0, '{}', 'req_1', 0, 'dead', 8, ?)",
      [`0x${"3f".repeat(32)}`, "reverted\n9  done  0xfake…  1  1  0  0xforged \u001b[31m"],
    );
    opened.close();
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["settlements", "list", "--config", config])).toBe(0);
      const lines = printed.mock.calls.map((call) => String(call[0]));
      expect(lines).toHaveLength(3); // the counts, the header and the one row
      expect(lines[1]).toMatch(/^ID {2}STATE {2}COMMITMENT {3}NONCE {2}AMOUNT {2}ATTEMPTS {2}TX \/ LAST ERROR$/);
      expect(lines[2]).toStartWith("1   dead   0x3f3f3f3f…  7      5000    8         reverted\\u000a9");
      for (const line of lines) expect(line).not.toMatch(/[\u0000-\u001f]/);
    } finally {
      printed.mockRestore();
    }
  });

  test("cells made elsewhere (an older row, an upstream's error) are shown escaped", () => {
    expect(
      formatTable([
        ["A", "B"],
        ["x\u001b[2Jy", "z\nw"],
      ]),
    ).toEqual([`A${" ".repeat(12)}B`, "x\\u001b[2Jy  z\\u000aw"]);
    expect(keyName("  ci\r\n\tbuild  ")).toBe("ci build");
    expect(keyName("\u200b\u0007")).toBe("default");
  });
});

describe("command shapes", () => {
  test("--version alone prints the version, as `version` does (regression: it was read as serve's unknown flag)", async () => {
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["--version"])).toBe(0);
      expect(String(printed.mock.calls.at(-1)?.[0])).toMatch(/^modelgate \S+ \(commit \S+, interface 2026-06-16, bun /);
    } finally {
      printed.mockRestore();
    }
  });

  test("a flag the command does not take, or one operand too many, is refused before anything runs", async () => {
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      const refused: Array<[string[], string]> = [
        [["key", "create", "--user", "a@example.com", "--expire", "30d"], "modelgate key create has no flag --expire"],
        [["key", "revoke", "key_a", "key_b"], 'modelgate key revoke: unexpected argument "key_b"'],
        [["user", "add", "a@x.io", "b@x.io"], 'modelgate user add: unexpected argument "b@x.io"'],
        [["credits", "grant", "--user", "a@x.io", "--amount", "1", "--ammount", "2"], "modelgate credits grant has no flag --ammount"],
        [["config", "check", "extra"], 'modelgate config check: unexpected argument "extra"'],
        [["serve", "--port", "1"], "modelgate serve has no flag --port"],
        [["key", "list", "--bogus"], "modelgate key list has no flag --bogus"],
        [["version", "now"], 'modelgate version: unexpected argument "now"'],
        // Decimal digits below 2^53 (regression: 0x10 was 16, 1e3 1000, and an empty value 0).
        ...["9007199254740993", "0x10", "1e3", "0b11", "", " 7", "-1"].map((n): [string[], string] => [
          ["serve", "--service-id", n],
          "--service-id must be a whole number from 0 to 2^53 - 1, in decimal digits",
        ]),
        // Digits only (regression: 1e30 gave x-ratelimit headers of "1e+30"; 0x10 was taken as 16).
        ...["1e30", "0x10", " 7", "99999999999", "0", "1.5"].map((n): [string[], string] => [
          ["key", "create", "--user", "a@example.com", "--per-minute", n],
          "--per-minute must be a whole number from 1 to 1000000000 (empty clears it)",
        ]),
        // Key policy flags: checked before the database is opened, one line each.
        [
          ["key", "create", "--user", "a@example.com", "--budget", "5/fortnight"],
          '--budget: "5/fortnight" is not an amount of credits per period, like 5/day (periods: day, week, month, total; empty clears it)',
        ],
        [
          ["key", "update", "key_a", "--budget", "-1/day"],
          '--budget: "-1/day" is not an amount of credits per period, like 5/day (periods: day, week, month, total; empty clears it)',
        ],
        [
          ["key", "create", "--user", "a@example.com", "--allow-ip", "10.0.0.0/33"],
          '--allow-ip: "10.0.0.0/33" is not an IP address or a CIDR block like 10.0.0.0/8 or fd00::/8',
        ],
        [
          ["key", "update", "key_a", "--allow-ip", "10.0.0.1,example.com"],
          '--allow-ip: "example.com" is not an IP address or a CIDR block like 10.0.0.0/8 or fd00::/8',
        ],
        [["key", "update", "key_a", "--tokens-per-minute", "1e3"], "--tokens-per-minute must be a whole number from 1 to 1000000000 (empty clears it)"],
        [["key", "update", "key_a"], "key update: give at least one of --models, --budget, --per-minute, --tokens-per-minute, --allow-ip"],
        // One rule for row ids, checked before the database is opened (regression: jobs took 1e2 and " 7", settlements refused 07 with the bare usage).
        ...["1e2", " 7", "0x10", "0", "-1", "1.0"].flatMap(
          (id): Array<[string[], string]> => [
            [["jobs", "retry", id], "usage: modelgate jobs retry CALL_ID: the id is a whole number from 1, as the list shows it"],
            [["settlements", "retry", id], "usage: modelgate settlements retry ID: the id is a whole number from 1, as the list shows it"],
          ],
        ),
        [["jobs", "retry"], "usage: modelgate jobs retry CALL_ID"],
        [["settlements", "retry"], "usage: modelgate settlements retry ID"],
      ];
      for (const [argv, message] of refused) {
        error.mockClear();
        expect(await runCli([...argv, "--config", "/nonexistent/modelgate.toml"])).toBe(2);
        expect(error).toHaveBeenCalledWith(`modelgate: ${message}`);
      }
    } finally {
      error.mockRestore();
    }
  });

  test("a bad MODELGATE_SERVICE_ID is named as the variable it came from (regression: the error named --service-id)", async () => {
    const error = spyOn(console, "error").mockImplementation(() => {});
    process.env.MODELGATE_SERVICE_ID = "0x1F";
    try {
      expect(await runCli(["serve", "--config", "/nonexistent/modelgate.toml"])).toBe(2);
      expect(error).toHaveBeenCalledWith("modelgate: MODELGATE_SERVICE_ID must be a whole number from 0 to 2^53 - 1, in decimal digits");
      // Empty is unset, as for MODELGATE_CONFIG (review finding: a unit's `=${ID}` with ID unset stopped start-up).
      process.env.MODELGATE_SERVICE_ID = "";
      expect(await runCli(["serve", "--config", "/nonexistent/modelgate.toml"])).toBe(1);
      expect(String(error.mock.calls.at(-1)?.[0])).toStartWith("modelgate: config error: /nonexistent/modelgate.toml: cannot read");
    } finally {
      delete process.env.MODELGATE_SERVICE_ID;
      error.mockRestore();
    }
  });

  test("a row id with leading zeros is the number it spells (regression: settlements retry 07 got the usage)", async () => {
    const { config, dataDir } = freshConfig();
    openDatabase(dataDir).close(); // a server has run here
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["settlements", "retry", "07", "--config", config])).toBe(1);
      expect(await runCli(["jobs", "retry", "007", "--config", config])).toBe(1);
      expect(printed.mock.calls.map((call) => String(call[0]))[0]).toBe(
        "settlement 7 is not dead (or does not exist, or its client's newer authorization for the nonce is being served); nothing to retry",
      );
    } finally {
      printed.mockRestore();
    }
  });

  test("what the user typed cannot retitle or recolour the terminal through an error (regression: an email's escape sequence was printed raw)", async () => {
    const { config } = freshConfig();
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "ctl\u001b]0;pwned\u0007@x", "--config", config])).toBe(2);
      expect(String(error.mock.calls.at(-1)?.[0])).toBe('modelgate: "ctl\\u001b]0;pwned\\u0007@x" is not an email address');
    } finally {
      error.mockRestore();
    }
  });

  test("an API key typed where something else belongs is never printed back whole", async () => {
    const { config } = freshConfig();
    const key = "sk-mg-7t47cbyr2eonqy7linz3pn6cag6mmb6powg6hiajsigalq";
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await runCli(["key", "revoke", key, "--config", config])).toBe(2);
      expect(String(error.mock.calls.at(-1)?.[0])).not.toContain(key);
      expect(await runCli(["key", "revoke", "key_a", key, "--config", config])).toBe(2);
      expect(error).toHaveBeenLastCalledWith('modelgate: modelgate key revoke: unexpected argument "sk-mg-7t47cb…"');
      // Pasted as the command itself (regression: the unknown-command error printed it whole).
      const printed = spyOn(console, "log").mockImplementation(() => {});
      try {
        expect(await runCli([key])).toBe(2);
      } finally {
        printed.mockRestore();
      }
      expect(error.mock.calls.at(-2)?.[0]).toBe('modelgate: unknown command "sk-mg-7t47cb…"');
      for (const call of error.mock.calls) expect(String(call[0])).not.toContain(key.slice(0, 14));
    } finally {
      error.mockRestore();
    }
  });

  test("an unknown subcommand creates no data directory or database before its usage error", async () => {
    const { config, dataDir } = freshConfig();
    const error = spyOn(console, "error").mockImplementation(() => {});
    try {
      for (const command of ["settlements", "jobs", "key", "credits", "user"]) expect(await runCli([command, "bogus", "--config", config])).toBe(2);
      // Nor a bad flag value (regression: settlements list --state bogus created the database first).
      for (const command of ["settlements", "jobs"]) expect(await runCli([command, "list", "--state", "bogus", "--config", config])).toBe(2);
    } finally {
      error.mockRestore();
    }
    expect(existsSync(dataDir)).toBe(false);
  });

  test("an unknown command is named, with the usage and exit 2", async () => {
    const error = spyOn(console, "error").mockImplementation(() => {});
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["bogus"])).toBe(2);
      expect(error).toHaveBeenCalledWith('modelgate: unknown command "bogus"');
      // Names an object has by inheritance are not commands (regression: "toString" crashed with a stack trace).
      for (const name of ["toString", "hasOwnProperty", "__proto__", "constructor"]) {
        expect(await runCli([name])).toBe(2);
        expect(error.mock.calls.at(-2)?.[0]).toBe(`modelgate: unknown command ${JSON.stringify(name)}`);
        // As a subcommand: the command's usage, not an internal error.
        expect(await runCli(["user", name, "a@b.io", "--config", "/nonexistent/modelgate.toml"])).toBe(2);
        expect(String(error.mock.calls.at(-1)?.[0])).toStartWith("modelgate: usage: modelgate user");
      }
      // C1 controls and bidi overrides, which JSON leaves raw, are escaped too (review finding).
      expect(await runCli(["bad\u009b\u202ecmd"])).toBe(2);
      expect(error.mock.calls.at(-2)?.[0]).toBe('modelgate: unknown command "bad\\u009b\\u202ecmd"');
      // The usage goes to stderr with the error (regression: on stdout, `KEY=$(modelgate kye …)` took it for the key).
      expect(printed).not.toHaveBeenCalled();
      expect(String(error.mock.calls[1]?.[0])).toStartWith("usage: modelgate");
    } finally {
      error.mockRestore();
      printed.mockRestore();
    }
  });

  test("the data directory it creates is private to the user (it holds password hashes and the ledger)", async () => {
    const { config, dataDir } = freshConfig();
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["migrate", "--config", config])).toBe(0);
      // What it applied, then nothing (regression: a fresh database said "up to date" without applying).
      expect(String(printed.mock.calls.at(-1)?.[0])).toEndWith(`, applied ${migrations.map((m) => m.tag).join(", ")}`);
      expect(await runCli(["migrate", "--config", config])).toBe(0);
      expect(String(printed.mock.calls.at(-1)?.[0])).toMatch(/^database is up to date \(.*\)$/);
    } finally {
      printed.mockRestore();
    }
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
  });
});

describe("parseExpiry", () => {
  const now = Date.UTC(2026, 10, 22, 12);

  test("durations and dates", () => {
    expect(parseExpiry("30d", now)).toBe(now + 30 * 86_400_000);
    expect(parseExpiry("90m", now)).toBe(now + 90 * 60_000);
    expect(parseExpiry("2w", now)).toBe(now + 14 * 86_400_000);
    expect(parseExpiry("2027-01-01", now)).toBe(Date.UTC(2027, 0, 1));
    expect(parseExpiry("2028-02-29", now)).toBe(Date.UTC(2028, 1, 29));
    expect(parseExpiry("2027-01-01T12:30:00+02:00", now)).toBe(Date.UTC(2027, 0, 1, 10, 30));
  });

  test("a time without an offset is UTC, as a day is, whatever the machine's zone (regression: it was read in local time)", () => {
    const zone = process.env.TZ;
    process.env.TZ = "America/New_York";
    try {
      expect(new Date(2027, 0, 1).getTimezoneOffset()).toBe(300); // the zone took effect
      expect(parseExpiry("2027-01-01T12:00", now)).toBe(Date.UTC(2027, 0, 1, 12));
      expect(parseExpiry("2027-01-01T12:00:30.5", now)).toBe(Date.UTC(2027, 0, 1, 12, 0, 30, 500));
      expect(parseExpiry("2027-01-01", now)).toBe(Date.UTC(2027, 0, 1));
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });

  test('a duration is at most 100 years, and one longer is told so (regression: 999999w ran to the year 21192 and 1000000w was "neither a duration nor a date")', () => {
    expect(parseExpiry("5214w", now)).toBe(now + 5214 * 7 * 86_400_000);
    expect(parseExpiry("36500d", now)).toBe(now + 36500 * 86_400_000);
    for (const text of ["36501d", "999999w", "1000000w", "99999999999999999999m"]) {
      expect(() => parseExpiry(text, now)).toThrow(
        new UsageError(`--expires: "${text}" is longer than 100 years; leave --expires out for a key that never expires`),
      );
    }
  });

  test("a day in the years 0 to 99 is in the past, not nonsense (regression: Date.UTC read 0001 as 1901)", () => {
    expect(() => parseExpiry("0001-01-01", now)).toThrow("is in the past");
  });

  test("refused: a zero duration (regression: 0d made a key that had already expired), the past, nonsense", () => {
    // Dates only as ISO 8601 and only days that exist (regression: "1" was the year 2001, 2027-02-30 was March 2).
    for (const text of ["0d", "0m", "000h", "2026-01-01", "-5d", "1.5d", "soon", "", "1", "2027-02-30", "2027-13-01", "Jan 1 2030", "2030"]) {
      expect(() => parseExpiry(text, now)).toThrow(UsageError);
    }
  });
});

describe("credits grant --note", () => {
  test("is stored as one line of at most 200 characters, a pasted key cut to its prefix (regression: 100,000 characters, line breaks, escapes and a whole key were stored as given)", async () => {
    const { config, dataDir } = freshConfig();
    const opened = openDatabase(dataDir);
    await createUser(opened.db, { email: "payee@example.com" });
    opened.close();
    const key = `sk-mg-${"a".repeat(46)}`;
    const log = spyOn(console, "log").mockImplementation(() => {});
    try {
      const long = `${key}\nline\u001b[31m ${"n".repeat(500)}`;
      expect(await runCli(["credits", "grant", "--user", "payee@example.com", "--amount", "1", "--note", long, "--config", config])).toBe(0);
      expect(await runCli(["credits", "grant", "--user", "payee@example.com", "--amount", "1", "--note", " \t ", "--config", config])).toBe(0);
    } finally {
      log.mockRestore();
    }
    const reopened = openDatabase(dataDir);
    const notes = reopened.sqlite
      .query<{ note: string | null }, []>("SELECT note FROM ledger ORDER BY id")
      .all()
      .map((row) => row.note);
    reopened.close();
    const expected = `sk-mg-aaaaaa… line [31m ${"n".repeat(500)}`.slice(0, 200);
    expect(notes).toEqual([expected, null]);
  });
});

describe("user add without a password", () => {
  async function added(extraToml: string): Promise<string> {
    const { config } = freshConfig();
    writeFileSync(config, `${readFileSync(config, "utf8")}${extraToml}`);
    const printed = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "nopass@example.com", "--config", config])).toBe(0);
      return String(printed.mock.calls.at(-1)?.[0]);
    } finally {
      printed.mockRestore();
    }
  }

  test("names only the sign-ins the config has, and API keys when it has none", async () => {
    const none = await added("");
    expect(none).not.toContain("GitHub");
    expect(none).toContain("no sign-in is configured ([auth.github] or [auth.google]): modelgate key create gives them API keys");
    // The secret's variable need not be set: the message reads which providers are written, not their secrets.
    const github = await added(`[auth.github]\nclient_id = "id"\nclient_secret = "env:UNSET_FOR_THIS_TEST"\n`);
    expect(github).toEndWith("; no password: sign in with GitHub, or use API keys");
  });
});

describe("key create and [limits] keys_per_user", () => {
  test("the CLI holds a user to the cap the dashboard does: past it, key create refuses and makes nothing", async () => {
    const { config, dataDir } = freshConfig();
    writeFileSync(config, `[server]\ndata_dir = "${dataDir}"\n\n[limits]\nkeys_per_user = 2\n`);
    const error = spyOn(console, "error").mockImplementation(() => {});
    const print = spyOn(console, "log").mockImplementation(() => {});
    try {
      expect(await runCli(["user", "add", "cap@example.com", "--config", config])).toBe(0);
      for (let i = 0; i < 2; i++) expect(await runCli(["key", "create", "--user", "cap@example.com", "--config", config])).toBe(0);
      expect(await runCli(["key", "create", "--user", "cap@example.com", "--config", config])).toBe(1);
      expect(String(error.mock.calls.at(-1)?.[0])).toContain("has 2 active keys, the most one user may hold ([limits] keys_per_user)");
      const opened = openDatabase(dataDir);
      try {
        expect((opened.db.$client.query("SELECT count(*) AS n FROM api_keys").get() as { n: number }).n).toBe(2);
      } finally {
        opened.db.$client.close();
      }
    } finally {
      error.mockRestore();
      print.mockRestore();
    }
  });
});
