/**
 * The compiled binary as three replicas on one Postgres database and one Redis (`[database] url`,
 * `[cluster] redis_url`), behind a round-robin balancer: a webhook burst spread over them with one
 * replica killed (-9) mid-burst keeps every 202'd call exactly once and never runs a call in two
 * handlers at once; a single box's SQLite database copied with `migrate --from-sqlite` is served
 * by the replicas as it was; `config check` reaches both and names a database it cannot use
 * without its URL; /api/status shows the engine and the schema's migration state.
 * Limits across replicas (1,000 requests, exactly 60 through), a revocation reaching the others,
 * a SpendAuth header replayed to another replica and Redis stopped and started are
 * tests/e2e/cluster.test.ts, which `make test-postgres` runs on Postgres too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrations } from "../../src/db/migrations-pg.gen";
import { BINARY, createUserKey, freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { startPostgres, type RunningPostgres } from "../support/postgres";
import { startRedis, type RunningRedis } from "../support/redis";
import { startRoundRobin, type RoundRobin } from "../support/round-robin";
import { outboxBodies, sendWebhook, webhooksToml } from "../support/webhook-binary";
import { eventually } from "../support/eventually";

let pg: RunningPostgres;
let redis: RunningRedis;
let upstream: MockUpstream;
const running: RunningGateway[] = [];
const balancers: RoundRobin[] = [];

beforeAll(async () => {
  pg = await startPostgres();
  redis = await startRedis();
  upstream = startMockUpstream();
}, 60_000);

afterAll(async () => {
  for (const balancer of balancers) await balancer.stop();
  for (const gateway of running) if (gateway.proc.exitCode === null) await gateway.stop("SIGKILL");
  upstream?.stop();
  await redis?.stop();
  await pg?.stop();
});

/** The models and storage every gateway here has; `[database]` alone (no url) keeps a box on SQLite. */
function config(database: "sqlite" | "postgres", tail = ""): string {
  return `${database === "postgres" ? '[database]\nurl = "env:DATABASE_URL"\n\n[cluster]\nredis_url = "env:TEST_REDIS_URL"' : "[database]"}

[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "paid"
targets = [{ upstream = "mock", model = "mock-small" }]
price = { prompt = 1.0, completion = 2.0 }

${tail}`;
}

async function replica(databaseUrl: string, tail = ""): Promise<RunningGateway> {
  const gateway = await startGateway(config("postgres", tail), { env: { DATABASE_URL: databaseUrl, TEST_REDIS_URL: redis.url } });
  running.push(gateway);
  return gateway;
}

async function chat(url: string, key: string): Promise<number> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "paid", messages: [{ role: "user", content: "hello" }] }),
  });
  await response.arrayBuffer();
  return response.status;
}

function balanceOf(output: string): string {
  return /: (\S+) credits/.exec(output)?.[1] ?? output;
}

describe("three replicas on one Postgres database", () => {
  test("a webhook burst across them, one killed -9 mid-burst: every 202'd call exactly once, never in two handlers at once", async () => {
    const databaseUrl = await pg.createDatabase("webhooks");
    const marks = mkdtempSync(join(tmpdir(), "modelgate-handled-"));
    mkdirSync(join(marks, "running"));
    // A handler holds its call's directory while it runs: a second handler of the same call at
    // the same moment cannot make it, and says so.
    const handler = `mkdir ${marks}/running/$X_GATEWAY_CALL_ID 2>/dev/null || echo $X_GATEWAY_CALL_ID >> ${marks}/overlaps; sleep 0.02; rmdir ${marks}/running/$X_GATEWAY_CALL_ID; echo $X_GATEWAY_CALL_ID >> ${marks}/done`;
    const hooks: string[] = [];
    const replicas: RunningGateway[] = [];
    for (let i = 0; i < 3; i++) {
      const port = freePort();
      replicas.push(await replica(databaseUrl, `${webhooksToml(port)}\n[[jobs]]\njob_id = 3\ncommand = ["sh", "-c", "${handler}"]\nconcurrency = 4\n`));
      hooks.push(`http://127.0.0.1:${port}`);
    }
    const balancer = await startRoundRobin(hooks);
    balancers.push(balancer);

    const acked = new Map<number, string>();
    let accepted = 0;
    let stop = false;
    let sent = 0;
    const worker = async (): Promise<void> => {
      while (!stop) {
        const body = JSON.stringify({ n: sent++, nonce: crypto.randomUUID() });
        const response = await sendWebhook(balancer.url, body).catch(() => null);
        if (response?.status !== 202) continue; // the killed replica's share: refused, never acknowledged
        accepted += 1;
        acked.set(((await response.json()) as { call_id: number }).call_id, body);
      }
    };
    const workers = Array.from({ length: 24 }, worker);
    expect(await eventually(() => acked.size >= 60, 20_000)).toBe(true);
    replicas[2].proc.kill("SIGKILL");
    await replicas[2].proc.exited;
    const atKill = acked.size;
    expect(await eventually(() => acked.size >= atKill + 120, 20_000)).toBe(true);
    stop = true;
    await Promise.all(workers);

    expect(accepted).toBe(acked.size); // no call_id handed out twice
    const outbox = await outboxBodies({ dir: replicas[0].dir, databaseUrl });
    const bodies = [...outbox.values()];
    expect(new Set(bodies).size).toBe(bodies.length);
    expect([...acked].filter(([callId, body]) => outbox.get(callId) !== body)).toEqual([]);
    // The calls the killed replica held are run again by the others once their lease runs out.
    const done = (): Set<number> => new Set(existsSync(join(marks, "done")) ? readFileSync(join(marks, "done"), "utf8").trim().split("\n").map(Number) : []);
    expect(await eventually(() => [...acked.keys()].every((id) => done().has(id)), 30_000, 100)).toBe(true);
    expect(existsSync(join(marks, "overlaps")) ? readFileSync(join(marks, "overlaps"), "utf8") : "").toBe("");
  }, 120_000);

  test("a single box's SQLite database, copied with migrate --from-sqlite, is served by the replicas as it was", async () => {
    const box = await startGateway(config("sqlite"));
    running.push(box);
    const user = await createUserKey(box, { email: "moved@example.com", credits: "10" });
    expect(await chat(box.url, user.key)).toBe(200);
    const before = await box.cli(["credits", "balance", "--user", user.email]);
    expect(await box.stop()).toBe(0);

    // Copied before any replica starts: a first start already stores rows (its setup link, its leases).
    const databaseUrl = await pg.createDatabase("moved");
    const target = join(box.dir, "postgres.toml");
    writeFileSync(target, `[database]\nurl = "${databaseUrl}"\n`);
    const copied = await box.cli(["migrate", "--config", target, "--from-sqlite", join(box.dir, "data", "modelgate.db")]);
    expect(copied.stderr).toBe("");
    expect(copied.stdout).toContain("\nusers: 1 row(s)\n");
    expect(copied.stdout).toContain("counts checked");
    const first = await replica(databaseUrl);
    const second = await replica(databaseUrl);

    expect(balanceOf((await second.cli(["credits", "balance", "--user", user.email])).stdout)).toBe(balanceOf(before.stdout));
    const listed = JSON.parse((await first.cli(["key", "list", "--json"])).stdout) as Array<{ id: string }>;
    expect(listed.map((k) => k.id)).toEqual([user.id]);
    for (const gateway of [first, second]) expect(await chat(gateway.url, user.key)).toBe(200);
    const after = balanceOf((await first.cli(["credits", "balance", "--user", user.email])).stdout);
    expect(Number(after)).toBeLessThan(Number(balanceOf(before.stdout)));
    // A key made on Postgres is one a SQLite id never was.
    const made = await createUserKey(second, { email: "new@example.com" });
    expect(made.id).not.toBe(user.id);
  }, 60_000);

  test("/api/status names the engine and the schema's migration state; config check reaches Postgres and Redis", async () => {
    const databaseUrl = await pg.createDatabase("status");
    const gateway = await replica(databaseUrl);
    const status = (await (await fetch(`${gateway.url}/api/status`)).json()) as Record<string, unknown>;
    expect(status.database).toEqual({
      engine: "postgres",
      reachable: true,
      migrations: { applied: migrations.length, latest: migrations.at(-1)!.tag, schema: "current" },
    });
    expect(JSON.stringify(status)).not.toContain(String(pg.port));
    expect(gateway.output()).toContain(`"msg":"database: applied migration ${migrations[0].tag}","where":"127.0.0.1:${pg.port}/status"`);

    const checked = await gateway.cli(["config", "check"]);
    expect(checked.code).toBe(0);
    expect(checked.stdout).toContain(`# database.url: connected to PostgreSQL 15.`);
    expect(checked.stdout).toContain(
      `at 127.0.0.1:${pg.port}/status; ${migrations.length} migrations applied, up to this release's ${migrations.at(-1)!.tag}\n`,
    );
    expect(checked.stdout).toContain(`# cluster.redis_url: connected to Redis at redis://127.0.0.1:${redis.port}\n`);

    // Passwords in the URLs, a database that does not exist, a Redis that is not there: each named
    // by where it points only.
    const check = async (env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> => {
      const child = Bun.spawn([BINARY, "config", "check"], {
        cwd: gateway.dir,
        env: { ...process.env, MODELGATE_CONFIG: join(gateway.dir, "modelgate.toml"), DATABASE_URL: databaseUrl, TEST_REDIS_URL: redis.url, ...env },
        stdout: "pipe",
        stderr: "pipe",
      });
      const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
      return { code, stdout, stderr };
    };
    expect(await check({ DATABASE_URL: `postgres://postgres:hunter2-secret@127.0.0.1:${pg.port}/missing` })).toEqual({
      code: 1,
      stdout: "",
      stderr: `modelgate: database.url: cannot use the Postgres database at 127.0.0.1:${pg.port}/missing (database "missing" does not exist)\n`,
    });
    const nowhere = freePort();
    const noRedis = await check({ TEST_REDIS_URL: `redis://:hunter2-secret@127.0.0.1:${nowhere}` });
    expect(noRedis.code).toBe(1);
    expect(noRedis.stderr).toStartWith(`modelgate: cluster.redis_url: cannot reach Redis at redis://127.0.0.1:${nowhere} within 1000 ms (`);
    expect(noRedis.stderr).not.toContain("hunter2");

    // The SQLite file's commands say what to use instead.
    const backup = await gateway.cli(["backup", join(gateway.dir, "copy.db")]);
    expect(backup.code).toBe(2);
    expect(backup.stderr).toContain("backup: database.url names a Postgres database, which this command cannot copy; back it up with pg_dump");
  }, 60_000);
});
