/**
 * Spawns the compiled binary (dist/modelgate, built by `make test`) on a free loopback port with a
 * config written to a fresh temporary directory, and waits until /api/health answers.
 * MODELGATE_TEST_BINARY names another build to run instead (an older commit's, to see a test fail).
 * MODELGATE_TEST_POSTGRES=1 puts every gateway on a shared Postgres and Redis (./shared-storage.ts).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";
import { describePostgresUrl } from "../../src/db/where";
import { ON_POSTGRES, sharedStorage, withSharedStorage } from "./shared-storage";

export const BINARY = process.env.MODELGATE_TEST_BINARY ?? resolve(import.meta.dir, "../../dist/modelgate");

export interface RunningGateway {
  url: string;
  port: number;
  dir: string;
  /** The Postgres database the harness gave it (MODELGATE_TEST_POSTGRES=1); null otherwise (SQLite in dir/data, or a database its config names). */
  databaseUrl: string | null;
  /** Where the CLI's messages say the data is: the SQLite file, or the database's host:port/name. */
  where: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** Runs a CLI command of the same binary against the same config and data directory. */
  cli(args: string[], stdin?: string | Uint8Array): Promise<{ code: number; stdout: string; stderr: string }>;
  stop(signal?: NodeJS.Signals): Promise<number>;
}

export interface UserKey {
  email: string;
  /** The API key itself (`sk-mg-…`), as `key create` printed it. */
  key: string;
  /** Its id (`key_…`) for `key revoke`. */
  id: string;
}

/**
 * A user and an API key made the way an operator makes them, with the binary's own CLI against
 * the running gateway's database: `user add` (skipped when the user already exists), `key create`,
 * and `credits grant` when `credits` is given. Fails the test with the CLI's stderr otherwise.
 */
export async function createUserKey(
  gateway: Pick<RunningGateway, "cli">,
  options: { email?: string; name?: string; expires?: string; credits?: string; admin?: boolean } = {},
): Promise<UserKey> {
  const email = options.email ?? `user-${crypto.randomUUID().slice(0, 8)}@example.com`;
  const run = async (args: string[], allow: (stderr: string) => boolean = () => false): Promise<string> => {
    const result = await gateway.cli(args);
    if (result.code !== 0 && !allow(result.stderr)) throw new Error(`modelgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
    return result.stdout;
  };
  await run(["user", "add", email, ...(options.admin ? ["--admin"] : [])], (stderr) => stderr.includes("already exists"));
  const create = ["key", "create", "--user", email, "--name", options.name ?? "test"];
  if (options.expires !== undefined) create.push("--expires", options.expires);
  const result = await gateway.cli(create);
  const key = result.stdout.trim();
  const id = /created (key_[a-z2-7]+)/.exec(result.stderr)?.[1];
  if (result.code !== 0 || !key.startsWith("sk-mg-") || id === undefined)
    throw new Error(`modelgate ${create.join(" ")} exited ${result.code}: ${result.stderr}`);
  if (options.credits !== undefined) await run(["credits", "grant", "--user", email, "--amount", options.credits]);
  return { email, key, id };
}

export function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port!;
  server.stop(true);
  return port;
}

/** `config` is TOML placed after a [server] table that sets listen and data_dir. */
export async function startGateway(config = "", options: { env?: Record<string, string>; dir?: string; args?: string[] } = {}): Promise<RunningGateway> {
  const dir = options.dir ?? mkdtempSync(join(tmpdir(), "modelgate-test-"));
  const port = freePort();
  const file = join(dir, "modelgate.toml");
  const serverTable = `[server]\nlisten = "127.0.0.1:${port}"\ndata_dir = "${join(dir, "data")}"\n`;
  const written = config.includes("[server]") ? config.replace("[server]", serverTable) : `${serverTable}\n${config}`;
  const deployed = ON_POSTGRES ? withSharedStorage(written, await sharedStorage(dir)) : { config: written, databaseUrl: null };
  writeFileSync(file, deployed.config);
  const env = { ...process.env, MODELGATE_CONFIG: file, ...options.env };
  const proc = Bun.spawn([BINARY, "serve", ...(options.args ?? [])], { cwd: dir, env, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  let output = "";
  const collect = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) output += new TextDecoder().decode(chunk);
  };
  void collect(proc.stdout);
  void collect(proc.stderr);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`modelgate exited with ${proc.exitCode}:\n${output}`);
    try {
      if ((await fetch(`${url}/api/health`)).ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error(`modelgate did not become healthy:\n${output}`);
    await Bun.sleep(20);
  }
  return {
    url,
    port,
    dir,
    databaseUrl: deployed.databaseUrl,
    where: deployed.databaseUrl === null ? join(dir, "data", "modelgate.db") : describePostgresUrl(deployed.databaseUrl),
    proc,
    output: () => output,
    cli: async (args, stdin) => {
      const child = Bun.spawn([BINARY, ...args], { cwd: dir, env, stdout: "pipe", stderr: "pipe", stdin: stdin === undefined ? "ignore" : new Blob([stdin]) });
      const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
      return { code, stdout, stderr };
    },
    stop: async (signal = "SIGTERM") => {
      proc.kill(signal);
      return await proc.exited;
    },
  };
}
