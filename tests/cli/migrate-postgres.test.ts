/**
 * `modelgate migrate --from-sqlite FILE` against the compiled binary and a real PostgreSQL 15: a
 * single box's database (users, keys, a paid request's debit and log row, more log rows than one
 * page of the copy, webhook jobs and their bodies, a settlement) arrives whole, with its counts printed; call_ids continue past the highest
 * SQLite ever gave; a second copy into the now non-empty database is refused and changes nothing;
 * and serve refuses a config with [database] url rather than serving from the SQLite file.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY, createUserKey, startGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";
import { startPostgres, type RunningPostgres } from "../support/postgres";
import { migrations } from "../../src/db/migrations-pg.gen";

const mock = startMockUpstream();
let pg: RunningPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  mock.stop();
  await pg?.stop();
});

async function run(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = Bun.spawn([BINARY, ...args], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

test("a single box's database is copied into an empty Postgres, counts checked, and not twice", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-copy-"));
  const gateway = await startGateway(
    `[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "paid"
price = { prompt = 1000, completion = 2000 }
targets = [{ upstream = "mock", model = "mock-small" }]
`,
    { dir },
  );
  const user = await createUserKey(gateway, { email: "a@example.com", credits: "10", admin: true });
  const chat = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${user.key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }] }),
  });
  expect(chat.status).toBe(200);
  await chat.arrayBuffer();
  expect(await gateway.stop()).toBe(0);

  const file = join(dir, "data", "modelgate.db");
  const sqlite = new Database(file);
  const job = sqlite.prepare("INSERT INTO webhook_jobs (job_id, service_id, path, body, created_at) VALUES (1, 0, '/hooks/x', ?, 1)");
  for (let i = 0; i < 3; i++) job.run(Buffer.from([0, 255, i]));
  // A delivery id kept for de-duplication: SQLite's key has a NUL between path and id.
  sqlite.run("UPDATE webhook_jobs SET dedupe_key = '/hooks/x' || char(0) || 'delivery-1' WHERE call_id = 2");
  sqlite.run("DELETE FROM webhook_jobs WHERE call_id = 3"); // AUTOINCREMENT never gives 3 again
  sqlite.run("INSERT INTO settlements (commitment, nonce, amount, expiry, authorization) VALUES ('0xc', '0x1', '5', 9, '{}')");
  const logRow = sqlite.prepare("INSERT INTO request_log (request_id, created_at, identity, model, status) VALUES (?, ?, 'anonymous', 'paid', 200)");
  sqlite.transaction(() => {
    for (let i = 0; i < 1_200; i++) logRow.run(`r${i}`, i); // more than one page of the copy
  })();
  sqlite.run("DELETE FROM request_log WHERE request_id = 'r600'");
  const counts = Object.fromEntries(
    ["users", "api_keys", "balances", "ledger", "request_log", "webhook_jobs", "settlements"].map((t) => [
      t,
      sqlite.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${t}`).get()!.n,
    ]),
  );
  sqlite.close();
  expect(counts.ledger).toBe(2); // the grant and the paid request's debit
  expect(counts.request_log).toBe(1_200); // the paid request's row, and 1,199 more

  const pgConfig = join(dir, "pg.toml");
  writeFileSync(pgConfig, `[server]\ndata_dir = "${join(dir, "elsewhere")}"\n\n[database]\nurl = "env:DATABASE_URL"\n`);
  const env = { MODELGATE_CONFIG: pgConfig, DATABASE_URL: pg.url };
  const copied = await run(["migrate", "--from-sqlite", file], env);
  expect(copied.stderr).toBe("");
  expect(copied.code).toBe(0);
  for (const [table, n] of Object.entries(counts)) expect(copied.stdout).toContain(`\n${table}: ${n} row(s)\n`);
  expect(copied.stdout).toContain("counts checked");

  const sql = pg.client("modelgate");
  const [admin] = await sql`SELECT email, is_admin, email_unverified FROM users`;
  expect(admin).toEqual({ email: "a@example.com", is_admin: true, email_unverified: false });
  const [key] = await sql`SELECT id FROM api_keys`;
  expect(key.id).toBe(user.id);
  const [balance] = await sql`SELECT micro FROM balances`;
  expect(Number(balance.micro)).toBeLessThan(10_000_000);
  const bodies = await sql`SELECT call_id, body FROM webhook_jobs ORDER BY call_id`;
  expect(bodies.map((r: { call_id: string }) => Number(r.call_id))).toEqual([1, 2]);
  expect([...bodies[1].body]).toEqual([0, 255, 1]);
  const [kept] = await sql`SELECT dedupe_key FROM webhook_jobs WHERE call_id = 2`;
  expect(kept.dedupe_key).toBe("/hooks/x delivery-1");
  const [next] = await sql`INSERT INTO webhook_jobs (job_id, service_id, path, body, created_at) VALUES (1, 0, '/x', ''::bytea, 1) RETURNING call_id`;
  expect(Number(next.call_id)).toBe(4);
  await sql`DELETE FROM webhook_jobs WHERE call_id = 4`;

  const again = await run(["migrate", "--from-sqlite", file], env);
  expect(again.code).toBe(2);
  expect(again.stderr).toContain("the Postgres database is not empty (");
  const [logged] = await sql`SELECT count(DISTINCT request_id)::int AS n FROM request_log`;
  expect(logged.n).toBe(1_200);
  const [users] = await sql`SELECT count(*)::int AS n FROM users`;
  expect(users.n).toBe(1);

  // The other commands work on the copy.
  const listed = await run(["key", "list", "--json"], env);
  expect((JSON.parse(listed.stdout) as Array<{ id: string }>).map((k) => k.id)).toEqual([user.id]);
  expect((await run(["user", "add", "b@example.com"], env)).code).toBe(0);
  const backup = await run(["backup", join(dir, "copy.db")], env);
  // backup copies SQLite's file: on Postgres it names pg_dump instead (a usage error).
  expect(backup.code).toBe(2);
  expect(backup.stderr).toContain("pg_dump");
  const shown = await run(["config", "check"], env);
  expect(shown.code).toBe(0);
  expect(shown.stdout).toContain(`"url": "<redacted>"`);
  expect(shown.stdout).toContain(`# database.url: connected to PostgreSQL 15.`);
  expect(shown.stdout).toContain(
    ` at 127.0.0.1:${pg.port}/modelgate; ${migrations.length} migrations applied, up to this release's ${migrations.at(-1)!.tag}\n`,
  );
  expect(shown.stdout).not.toContain(pg.url);
});

test("--from-sqlite refuses a file that is not a modelgate database, and needs [database] url", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-copy-"));
  const other = join(dir, "other.db");
  new Database(other).close();
  const config = join(dir, "pg.toml");
  const url = await pg.createDatabase("refusals");
  writeFileSync(config, `[database]\nurl = "${url}"\n`);
  const refused = await run(["migrate", "--from-sqlite", other], { MODELGATE_CONFIG: config });
  expect(refused.code).toBe(2);
  expect(refused.stderr).toContain("not a modelgate database");
  const missing = await run(["migrate", "--from-sqlite", join(dir, "nope.db")], { MODELGATE_CONFIG: config });
  expect(missing.stderr).toContain("--from-sqlite: no file at");
  const plain = join(dir, "plain.toml");
  writeFileSync(plain, `[server]\ndata_dir = "${join(dir, "data")}"\n`);
  const noUrl = await run(["migrate", "--from-sqlite", other], { MODELGATE_CONFIG: plain });
  expect(noUrl.code).toBe(2);
  expect(noUrl.stderr).toContain("set [database] url");
});
