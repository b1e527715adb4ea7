/**
 * `modelgate backup` and `modelgate restore` against the compiled binary: a backup taken while the
 * server serves paid chat requests and runs webhook jobs is consistent; restore refuses while the
 * server runs, and once it has stopped puts the backup in place, so that the restarted server
 * finds every key, balance and job the backup holds. Also the refusals of bad input.
 */
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY, createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { formatCredits } from "../../src/credits/amount";

const mock = startMockUpstream();
const running: RunningGateway[] = [];
afterAll(async () => {
  for (const gateway of running) if (gateway.proc.exitCode === null) await gateway.stop("SIGKILL");
  mock.stop();
});

function config(hooksPort: number): string {
  return `[limits]
api_key = { per_minute = 1000000 }

[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "paid"
price = { prompt = 1000, completion = 2000 }
targets = [{ upstream = "mock", model = "mock-small" }]

[webhooks]
enabled = true
bind_address = "127.0.0.1:${hooksPort}"

[[webhooks.endpoints]]
path = "/hooks/work"
job_id = 3
auth = "none"

[[jobs]]
job_id = 3
command = ["true"]
`;
}

interface Snapshot {
  keys: string[];
  balances: Record<string, number>;
  jobs: number[];
  debits: number;
}

/** What a database file holds: key ids, each user's balance, the outbox's call ids, the debits. */
function snapshot(file: string): Snapshot {
  const db = new Database(file, { readonly: true });
  try {
    const balances: Record<string, number> = {};
    for (const row of db.query<{ email: string; micro: number }, []>("SELECT email, micro FROM balances JOIN users ON users.id = user_id").all())
      balances[row.email] = row.micro;
    return {
      keys: db
        .query<{ id: string }, []>("SELECT id FROM api_keys ORDER BY id")
        .all()
        .map((r) => r.id),
      balances,
      jobs: db
        .query<{ call_id: number }, []>("SELECT call_id FROM webhook_jobs ORDER BY call_id")
        .all()
        .map((r) => r.call_id),
      debits: db.query<{ n: number }, []>("SELECT count(*) AS n FROM ledger WHERE kind = 'debit'").get()!.n,
    };
  } finally {
    db.close();
  }
}

test("a backup under load restores every key, balance and job; restore refuses while the server runs", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-backup-"));
  const hooksPort = freePort();
  const gateway = await startGateway(config(hooksPort), { dir });
  running.push(gateway);
  const users = await Promise.all([1, 2, 3].map((n) => createUserKey(gateway, { email: `u${n}@example.com`, credits: "100" })));

  let loading = true;
  const statuses = new Set<number>();
  const chats = users.map(async ({ key }) => {
    while (loading) {
      const response = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }] }),
      });
      statuses.add(response.status);
      await response.arrayBuffer();
    }
  });
  const hooks = (async () => {
    while (loading) statuses.add((await fetch(`http://127.0.0.1:${hooksPort}/hooks/work`, { method: "POST", body: "{}" })).status);
  })();
  // Traffic reaches the database before the backups are taken.
  while (snapshot(join(dir, "data", "modelgate.db")).debits < 10 && statuses.size <= 2) await Bun.sleep(50);

  const file = join(dir, "backup.db");
  const first = await gateway.cli(["backup", file]);
  expect(first).toMatchObject({ code: 0, stderr: "" });
  expect(first.stdout).toStartWith(`backed up ${join(dir, "data", "modelgate.db")} to ${file} (`);
  const again = await gateway.cli(["backup", file]);
  expect(again.code).toBe(2);
  expect(again.stderr).toContain(`${file} exists: give --force`);
  expect((await gateway.cli(["backup", file, "--force"])).code).toBe(0);
  loading = false;
  await Promise.all([...chats, hooks]);
  expect([...statuses].sort()).toEqual([200, 202]);

  const backedUp = snapshot(file);
  expect(backedUp.keys).toEqual(users.map((u) => u.id).sort());
  expect(backedUp.debits).toBeGreaterThan(0);
  expect(backedUp.jobs.length).toBeGreaterThan(0);
  for (const { email } of users) expect(backedUp.balances[email]).toBeLessThan(100_000_000);

  const refused = await gateway.cli(["restore", file]);
  expect(refused.code).toBe(1);
  expect(refused.stderr).toContain("is open in another process");
  expect(readdirSync(join(dir, "data")).filter((f) => f.includes("before-restore"))).toEqual([]);

  expect(await gateway.stop()).toBe(0);
  const restored = await gateway.cli(["restore", file]);
  expect(restored.code).toBe(0);
  expect(restored.stdout).toContain("the database it replaced is kept as ");
  expect(snapshot(join(dir, "data", "modelgate.db"))).toEqual(backedUp);

  const after = await startGateway(config(freePort()), { dir });
  running.push(after);
  const keys = JSON.parse((await after.cli(["key", "list", "--json"])).stdout) as Array<{ id: string }>;
  expect(keys.map((k) => k.id).sort()).toEqual(backedUp.keys);
  for (const { email } of users) {
    const balance = await after.cli(["credits", "balance", "--user", email]);
    expect(balance.stdout.trim()).toBe(`${email}: ${formatCredits(backedUp.balances[email])} credits`);
  }
  const jobs = JSON.parse((await after.cli(["jobs", "list", "--json", "--limit", "100000"])).stdout) as Array<{ callId: number }>;
  expect(jobs.map((j) => j.callId).sort((a, b) => a - b)).toEqual(backedUp.jobs);
  await after.stop();
}, 120_000);

test("bad input: no file, an existing file, an unwritable place, a file that is not a database", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-backup-bad-"));
  const gateway = await startGateway("", { dir });
  running.push(gateway);
  expect(await gateway.cli(["backup"])).toMatchObject({ code: 2, stderr: "modelgate: usage: modelgate backup FILE [--force]\n" });
  expect(await gateway.cli(["restore"])).toMatchObject({ code: 2, stderr: "modelgate: usage: modelgate restore FILE\n" });
  // A file where a directory should be: unwritable for root too.
  const text = join(dir, "notes.txt");
  writeFileSync(text, "not a database, but long enough to look like one to a careless reader ".repeat(20));
  const unwritable = await gateway.cli(["backup", join(text, "b.db")]);
  expect(unwritable.code).toBe(1);
  expect(unwritable.stderr).toContain(`cannot write ${join(text, "b.db")}`);
  const missingDir = await gateway.cli(["backup", join(dir, "nowhere", "b.db")]);
  expect(missingDir.code).toBe(1);
  expect(missingDir.stderr).toContain(`cannot write ${join(dir, "nowhere", "b.db")}`);
  const notDb = await gateway.cli(["restore", text]);
  expect(notDb.code).toBe(1);
  expect(notDb.stderr).toContain(`${text} is not a modelgate database`);
  expect(await gateway.cli(["restore", join(dir, "missing.db")])).toMatchObject({ code: 2 });
  expect(existsSync(join(dir, "data", "modelgate.db"))).toBe(true);
  await gateway.stop();
});

test("restore after a server died with kill -9: its -wal is folded into the kept database, its -shm removed", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-backup-crash-"));
  const gateway = await startGateway("", { dir });
  running.push(gateway);
  const before = await createUserKey(gateway, { email: "before@example.com" });
  const file = join(dir, "backup.db");
  expect((await gateway.cli(["backup", file])).code).toBe(0);
  const after = await createUserKey(gateway, { email: "after@example.com" });
  gateway.proc.kill("SIGKILL");
  await gateway.proc.exited;
  const data = join(dir, "data");
  // A killed server leaves its pid file behind (`modelgate reload` checks the process it names).
  expect(readdirSync(data).sort()).toEqual(["modelgate.db", "modelgate.db-shm", "modelgate.db-wal", "modelgate.pid"]);

  const restored = await gateway.cli(["restore", file]);
  expect(restored).toMatchObject({ code: 0, stderr: "" });
  const kept = readdirSync(data).find((f) => f.startsWith("modelgate.db.before-restore-"))!;
  expect(readdirSync(data).sort()).toEqual(["modelgate.db", kept, "modelgate.pid"].sort());
  expect(snapshot(join(data, "modelgate.db")).keys).toEqual([before.id]);
  // What the server wrote before it died was in its -wal: it is in the kept database.
  expect(snapshot(join(data, kept)).keys).toEqual([before.id, after.id].sort());
  const again = await startGateway("", { dir });
  running.push(again);
  const keys = JSON.parse((await again.cli(["key", "list", "--json"])).stdout) as Array<{ id: string }>;
  expect(keys.map((k) => k.id)).toEqual([before.id]);
  await again.stop();
});

test("on Postgres, backup and restore refuse in one line naming pg_dump and pg_restore, exit 2, and write nothing", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-backup-pg-"));
  const file = join(dir, "modelgate.toml");
  writeFileSync(file, `[server]\ndata_dir = "${join(dir, "data")}"\n\n[database]\nurl = "postgres://modelgate:secret@127.0.0.1:9/modelgate"\n`);
  const run = async (args: string[]) => {
    const proc = Bun.spawn([BINARY, ...args, "--config", file], { stdout: "pipe", stderr: "pipe" });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  };
  const backup = await run(["backup", join(dir, "b.db")]);
  expect(backup).toMatchObject({ code: 2, stdout: "" });
  expect(backup.stderr.trimEnd().split("\n")).toHaveLength(1);
  expect(backup.stderr).toContain("pg_dump");
  expect(backup.stderr).not.toContain("secret");
  const restore = await run(["restore", join(dir, "b.db")]);
  expect(restore).toMatchObject({ code: 2, stdout: "" });
  expect(restore.stderr).toContain("pg_restore");
  expect(readdirSync(dir)).toEqual(["modelgate.toml"]);
});
