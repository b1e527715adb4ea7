/**
 * Spawns the compiled binary (dist/modelgate, built by `make test`) on a free loopback port with a
 * config written to a fresh temporary directory, and waits until /api/health answers.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Subprocess } from "bun";

export const BINARY = resolve(import.meta.dir, "../../dist/modelgate");

export interface RunningGateway {
  url: string;
  port: number;
  dir: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** Runs a CLI command of the same binary against the same config and data directory. */
  cli(args: string[], stdin?: string): Promise<{ code: number; stdout: string; stderr: string }>;
  stop(signal?: NodeJS.Signals): Promise<number>;
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
  writeFileSync(file, config.includes("[server]") ? config.replace("[server]", serverTable) : `${serverTable}\n${config}`);
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
