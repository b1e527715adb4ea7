/**
 * Several processes opening a data_dir that does not exist yet, at the same moment (a server and
 * a CLI command started together by a provisioning script), against the compiled binary: each
 * waits for the other's migration instead of failing (regression: "database is locked" while
 * switching to WAL, or "table already exists" from applying the same migration twice). Only
 * serve, migrate and user add make a database; the other commands refuse a data_dir without one.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { BINARY } from "../support/binary";
import { migrations } from "../../src/db/migrations.gen";

test("processes starting together on a fresh data_dir all succeed, and each migration runs once", async () => {
  for (let round = 0; round < 10; round++) {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-first-"));
    const config = join(dir, "modelgate.toml");
    writeFileSync(config, `[server]\ndata_dir = "${join(dir, "data")}"\n`);
    const commands = [
      ["migrate"],
      ["user", "add", "a@example.com"],
      ["key", "list"],
      ["migrate"],
      ["user", "add", "b@example.com"],
      ["jobs", "list"],
      ["migrate"],
      ["key", "list"],
    ];
    const runs = commands.map((args) => Bun.spawn([BINARY, ...args, "--config", config], { stdout: "pipe", stderr: "pipe" }));
    const results = await Promise.all(runs.map(async (run) => ({ code: await run.exited, stderr: await new Response(run.stderr).text() })));
    for (const [i, result] of results.entries()) {
      // A reader that started before any process had made the file says so; nothing else may fail.
      const tooEarly =
        commands[i][1] === "list" && result.code === 2 && result.stderr.startsWith(`modelgate: no database at ${join(dir, "data", "modelgate.db")}: `);
      if (!tooEarly) expect({ command: commands[i], ...result }).toEqual({ command: commands[i], code: 0, stderr: "" });
    }
    const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
    expect((db.query("SELECT count(*) AS n FROM __drizzle_migrations").get() as { n: number }).n).toBe(migrations.length);
    expect((db.query("PRAGMA integrity_check").get() as { integrity_check: string }).integrity_check).toBe("ok");
    db.close();
  }
});

test("a database a newer release has migrated is refused by serve and by every command, in one line, and left as it was", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-newer-"));
  const config = join(dir, "modelgate.toml");
  writeFileSync(config, `[server]\nlisten = "127.0.0.1:0"\ndata_dir = "${join(dir, "data")}"\n`);
  expect(await Bun.spawn([BINARY, "user", "add", "ops@example.com", "--config", config], { stdout: "ignore", stderr: "ignore" }).exited).toBe(0);
  const file = join(dir, "data", "modelgate.db");
  const future = Date.UTC(2099, 0, 2);
  const before = new Database(file);
  before.run("INSERT INTO __drizzle_migrations (hash, created_at) VALUES ('from-a-later-release', ?)", [future]);
  before.close();
  for (const args of [["serve"], ["migrate"], ["key", "list"], ["user", "add", "b@example.com"]]) {
    const run = Bun.spawn([BINARY, ...args, "--config", config], { stdout: "pipe", stderr: "pipe" });
    const [code, stdout, stderr] = await Promise.all([run.exited, new Response(run.stdout).text(), new Response(run.stderr).text()]);
    expect({ args, code, stdout }).toEqual({ args, code: 1, stdout: "" });
    expect(stderr).toBe(
      `modelgate: ${file}: this database has been migrated by a newer modelgate (its schema is from 2099-01-02; this release's is from ${new Date(migrations.at(-1)!.when).toISOString().slice(0, 10)}, ${migrations.at(-1)!.tag}). Run that release or a later one, or point server.data_dir at another directory\n`,
    );
  }
  const after = new Database(file, { readonly: true });
  expect(after.query("SELECT count(*) AS n FROM users").get()).toEqual({ n: 1 });
  expect(after.query("SELECT count(*) AS n FROM __drizzle_migrations").get()).toEqual({ n: migrations.length + 1 });
  after.close();
});

test("a command that only reads or changes what is stored refuses a data_dir without a database, and makes none there (regression: key list from the wrong directory made an empty one and listed nothing)", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-nodb-"));
  const config = join(dir, "modelgate.toml");
  writeFileSync(config, `[server]\ndata_dir = "${join(dir, "data")}"\n`);
  const file = join(dir, "data", "modelgate.db");
  for (const args of [
    ["key", "list"],
    ["jobs", "list"],
    ["settlements", "list"],
    ["credits", "balance", "--user", "a@example.com"],
    ["user", "disable", "a@example.com"],
    ["key", "revoke", "key_abc"],
  ]) {
    const run = Bun.spawn([BINARY, ...args, "--config", config], { stdout: "pipe", stderr: "pipe" });
    const [code, stdout, stderr] = await Promise.all([run.exited, new Response(run.stdout).text(), new Response(run.stderr).text()]);
    expect({ args, code, stdout, stderr }).toEqual({
      args,
      code: 2,
      stdout: "",
      stderr: `modelgate: no database at ${file}: nothing is stored under this data_dir yet (a server's database is under the data_dir of its config: run from its directory, or pass --config; serve, migrate and user add create it)\n`,
    });
  }
  expect(existsSync(file)).toBe(false);
  expect(await Bun.spawn([BINARY, "user", "add", "a@example.com", "--config", config], { stdout: "ignore", stderr: "ignore" }).exited).toBe(0);
  expect(await Bun.spawn([BINARY, "key", "list", "--config", config], { stdout: "ignore", stderr: "ignore" }).exited).toBe(0);
});
