/**
 * Several processes opening a data_dir that does not exist yet, at the same moment (a server and
 * a CLI command started together by a provisioning script), against the compiled binary: each
 * waits for the other's migration instead of failing (regression: "database is locked" while
 * switching to WAL, or "table already exists" from applying the same migration twice).
 */
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
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
    const commands = [["migrate"], ["user", "add", "a@example.com"], ["key", "list"], ["migrate"], ["user", "add", "b@example.com"], ["jobs", "list"], ["migrate"], ["key", "list"]];
    const runs = commands.map((args) => Bun.spawn([BINARY, ...args, "--config", config], { stdout: "pipe", stderr: "pipe" }));
    const results = await Promise.all(runs.map(async (run) => ({ code: await run.exited, stderr: await new Response(run.stderr).text() })));
    for (const result of results) expect(result).toEqual({ code: 0, stderr: "" });
    const db = new Database(join(dir, "data", "modelgate.db"), { readonly: true });
    expect((db.query("SELECT count(*) AS n FROM __drizzle_migrations").get() as { n: number }).n).toBe(migrations.length);
    expect((db.query("PRAGMA integrity_check").get() as { integrity_check: string }).integrity_check).toBe("ok");
    db.close();
  }
});
