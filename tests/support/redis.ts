/**
 * A real redis-server per test (Debian's, installed by scripts/ensure-debian.sh when missing): on
 * a free loopback port, no persistence, its files in a fresh temporary directory. stop() and
 * start() again keep the port, so a gateway can watch Redis go away and come back.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { RedisClient, type Subprocess } from "bun";
import { freePort } from "./binary";

export interface RunningRedis {
  url: string;
  port: number;
  /** A client of the test's own, connected. */
  client(): Promise<RedisClient>;
  stop(): Promise<void>;
  /** Starts it again on the same port (empty: nothing was persisted). */
  start(): Promise<void>;
}

function ensureRedis(): void {
  const ensured = Bun.spawnSync(["bash", resolve(import.meta.dir, "../../scripts/ensure-debian.sh"), "redis-server:redis-server"], {
    stdout: "inherit",
    stderr: "inherit",
  });
  if (ensured.exitCode !== 0) throw new Error("redis-server is missing and could not be installed");
}

/** `databases`: how many numbered databases (`redis://…/N`) it has, 16 by default as Redis has. */
export async function startRedis(options: { databases?: number } = {}): Promise<RunningRedis> {
  ensureRedis();
  const dir = mkdtempSync(join(tmpdir(), "modelgate-redis-"));
  const port = freePort();
  const url = `redis://127.0.0.1:${port}`;
  let proc: Subprocess | null = null;
  const clients: RedisClient[] = [];
  const start = async (): Promise<void> => {
    proc = Bun.spawn(
      [
        "redis-server",
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--dir",
        dir,
        "--databases",
        String(options.databases ?? 16),
      ],
      {
        cwd: dir,
        stdout: "ignore",
        stderr: "inherit",
      },
    );
    const deadline = Date.now() + 10_000;
    for (;;) {
      const probe = new RedisClient(url, { autoReconnect: false, connectionTimeout: 500 });
      try {
        await probe.connect();
        probe.close();
        return;
      } catch {
        probe.close();
      }
      if (Date.now() > deadline) throw new Error(`redis-server did not start on port ${port}`);
      await Bun.sleep(20);
    }
  };
  await start();
  return {
    url,
    port,
    async client() {
      const client = new RedisClient(url);
      await client.connect();
      clients.push(client);
      return client;
    },
    async stop() {
      for (const client of clients.splice(0)) client.close();
      if (proc === null) return;
      proc.kill("SIGKILL");
      await proc.exited;
      proc = null;
    },
    start,
  };
}
