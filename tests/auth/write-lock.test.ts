/**
 * The CLI and the server share one SQLite file. A change that reads before it writes (user disable,
 * user enable) must wait for a write another process is committing, not fail: here a second
 * process holds the write lock across the moment the change starts, then commits.
 */
import { expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openDatabase } from "../../src/db/client";
import { createUser, disableUser, enableUser } from "../../src/auth/users";

const HOLD_LOCK = `
  const { Database } = require("bun:sqlite");
  const db = new Database(process.argv[1]);
  db.run("PRAGMA busy_timeout = 5000");
  db.run("BEGIN IMMEDIATE");
  db.run("INSERT INTO request_log (request_id, created_at, identity, model, status) VALUES ('req_other', 1, 'anonymous', 'm', 200)");
  console.log("locked");
  await Bun.sleep(300);
  db.run("COMMIT");
`;

async function whileAnotherProcessWrites<T>(file: string, change: () => Promise<T>): Promise<T> {
  const other = Bun.spawn([process.execPath, "-e", HOLD_LOCK, file], { stdout: "pipe", stderr: "inherit" });
  const reader = other.stdout.getReader();
  const { value } = await reader.read(); // "locked"
  expect(new TextDecoder().decode(value)).toContain("locked");
  const result = await change();
  expect(await other.exited).toBe(0);
  return result;
}

test("user disable and enable wait for another process's write instead of failing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-lock-"));
  const { db, sqlite, close } = openDatabase(dir);
  const user = await createUser(db, { email: "locked@example.com" });
  if ("error" in user) throw new Error(user.error);
  const file = join(dir, "modelgate.db");
  expect(await whileAnotherProcessWrites(file, () => disableUser(db, user.id))).toBe("disabled");
  expect(await whileAnotherProcessWrites(file, () => enableUser(db, user.id))).toBe("enabled");
  expect(sqlite.query("SELECT count(*) AS n FROM request_log").get()).toEqual({ n: 2 });
  close();
});
