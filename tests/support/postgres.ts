/**
 * A real PostgreSQL 15 cluster per test (Debian's, installed by scripts/ensure-postgres.sh when
 * missing): initdb into a fresh directory, started with pg_ctl on a free loopback port with its
 * socket in the same directory, no fsync, trust authentication on loopback only. stop() stops it
 * and removes the directory. Run as root, initdb and postgres run as the unprivileged user the
 * script makes (they refuse root), and the directory is made under /tmp itself: the test run's
 * TMPDIR is private to root, so that user could not reach a directory inside it.
 */
import { chownSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { SQL } from "bun";
import { freePort } from "./binary";

const BIN = "/usr/lib/postgresql/15/bin";

export interface RunningPostgres {
  /** postgres://postgres@127.0.0.1:PORT/modelgate: a database of its own, empty. */
  url: string;
  port: number;
  /** The postmaster's process id (its backends are its children). */
  pid: number;
  /** A client of the test's own, on the cluster's `postgres` database unless `database` is named. */
  client(database?: string): SQL;
  /** Makes another empty database in the same cluster and returns its URL. */
  createDatabase(name: string): Promise<string>;
  stop(): Promise<void>;
}

function ensurePostgres(): string {
  const ensured = Bun.spawnSync(["bash", resolve(import.meta.dir, "../../scripts/ensure-postgres.sh")], { stdout: "pipe", stderr: "inherit" });
  if (ensured.exitCode !== 0) throw new Error("PostgreSQL 15 is missing and could not be installed");
  return ensured.stdout.toString().trim();
}

function runAs(user: string, argv: string[]): void {
  const command = process.getuid?.() === 0 ? ["runuser", "-u", user, "--", ...argv] : argv;
  const ran = Bun.spawnSync(command, { stdout: "pipe", stderr: "pipe" });
  if (ran.exitCode !== 0) throw new Error(`${argv[0]} failed: ${ran.stderr.toString()}${ran.stdout.toString()}`);
}

export async function startPostgres(options: { maxConnections?: number } = {}): Promise<RunningPostgres> {
  const user = ensurePostgres();
  const asRoot = process.getuid?.() === 0;
  const dir = mkdtempSync(join(asRoot ? "/tmp" : tmpdir(), "modelgate-pg-"));
  if (asRoot) {
    const id = (flag: string): number => Number(Bun.spawnSync(["id", flag, user]).stdout.toString().trim());
    chownSync(dir, id("-u"), id("-g"));
  }
  const data = join(dir, "data");
  const port = freePort();
  try {
    runAs(user, [`${BIN}/initdb`, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions"]);
    const settings = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=${options.maxConnections ?? 100}`;
    runAs(user, [`${BIN}/pg_ctl`, "-D", data, "-o", settings, "-l", join(dir, "log"), "-w", "-t", "30", "start"]);
  } catch (err) {
    rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
    throw err;
  }
  const base = `postgres://postgres@127.0.0.1:${port}`;
  const clients: SQL[] = [];
  const client = (database = "postgres"): SQL => {
    const sql = new SQL({ url: `${base}/${database}`, max: 2 });
    clients.push(sql);
    return sql;
  };
  const createDatabase = async (name: string): Promise<string> => {
    await client().unsafe(`CREATE DATABASE "${name}"`);
    return `${base}/${name}`;
  };
  const url = await createDatabase("modelgate");
  return {
    url,
    port,
    pid: Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]),
    client,
    createDatabase,
    async stop() {
      for (const sql of clients.splice(0)) await sql.close();
      runAs(user, [`${BIN}/pg_ctl`, "-D", data, "-m", "immediate", "-w", "stop"]);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5 });
    },
  };
}
