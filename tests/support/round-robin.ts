/**
 * A load balancer for tests: each request goes to the next of `targets` in turn, as any
 * round-robin balancer in front of gateway replicas would send it (method, path, headers, body).
 * It runs in a process of its own (./round-robin-server.ts).
 */
import { resolve } from "node:path";

export interface RoundRobin {
  url: string;
  stop(): Promise<void>;
}

export async function startRoundRobin(targets: string[]): Promise<RoundRobin> {
  const proc = Bun.spawn([process.execPath, resolve(import.meta.dir, "round-robin-server.ts"), ...targets], {
    stdout: "pipe",
    stderr: "inherit",
    stdin: "ignore",
  });
  const reader = proc.stdout.getReader();
  let printed = "";
  while (!printed.includes("\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error("the round-robin balancer exited before it listened");
    printed += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return {
    url: `http://127.0.0.1:${Number(printed.trim())}`,
    async stop() {
      proc.kill();
      await proc.exited;
    },
  };
}
