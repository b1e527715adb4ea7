/**
 * The long-running children of a bench (the mock upstream, the floor proxy, gateways, peers):
 * spawned from the repository root, pinned to CPUs with taskset, waited on until they answer,
 * and all killed when the bench process exits, however it exits. Its temporary directories
 * (databases, request logs of millions of lines) are removed then too.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";

export const ROOT = join(import.meta.dir, "..");
const UP_WITHIN_MS = 15_000;

const children: Subprocess[] = [];
const dirs: string[] = [];
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/** A new temporary directory, removed when the bench exits (a gateway's log there grows by about 1 GB a minute under load). */
export function benchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
}

/** Kills `proc` with the bench (for children spawned elsewhere, such as startModelgate's). */
export function killOnExit(proc: Subprocess): void {
  children.push(proc);
}

/** Pins every thread of `pid` to `cpus` (a taskset list); null leaves it to the scheduler. */
export function pinTo(pid: number, cpus: string | null): void {
  if (cpus !== null) Bun.spawnSync(["taskset", "-a", "-cp", cpus, String(pid)], { stdout: "ignore", stderr: "ignore" });
}

/** Spawns a server, pins it to `cpus` and waits until `probe` answers true (15 s at most). */
export async function spawnServer(argv: string[], probe: () => Promise<boolean>, cpus: string | null): Promise<Subprocess> {
  const proc = Bun.spawn(argv, { cwd: ROOT, stdout: "ignore", stderr: "pipe", stdin: "ignore" });
  killOnExit(proc);
  pinTo(proc.pid, cpus);
  const deadline = Date.now() + UP_WITHIN_MS;
  while (!(await probe().catch(() => false))) {
    if (proc.exitCode !== null) throw new Error(`${argv.join(" ")} exited with ${proc.exitCode}: ${await new Response(proc.stderr).text()}`);
    if (Date.now() > deadline) throw new Error(`${argv.join(" ")} did not come up within ${UP_WITHIN_MS / 1000} s`);
    await Bun.sleep(25);
  }
  return proc;
}

/** The mock upstream (tests/support/mock-upstream.ts) on `port`, answering; its base URL ends in /v1. */
export async function startMock(port: number, cpus: string | null): Promise<{ url: string; proc: Subprocess }> {
  const url = `http://127.0.0.1:${port}/v1`;
  const proc = await spawnServer([process.execPath, "tests/support/mock-upstream.ts", String(port)], answers(`${url}/models`), cpus);
  return { url, proc };
}

/** A probe: `url` answers with a status below 500. */
export function answers(url: string): () => Promise<boolean> {
  return () => fetch(url).then((r) => r.status < 500);
}
