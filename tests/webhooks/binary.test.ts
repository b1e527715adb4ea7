// Against the compiled binary over loopback: a burst of signed requests, kill -9 at a random
// moment, restart: every call_id that got a 202 is in the outbox exactly once with its body,
// repeated over several rounds. Also: a job handler killed with the process is redelivered after
// its lease, `jobs list|retry`, the status section, the service_id warning, chunked 413, a body far
// past the limit, bodies in flight, and requests without a Host header.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signBody } from "../../src/webhooks/auth";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { outboxBodies, sendWebhook as send, WEBHOOK_SECRET, webhooksToml } from "../support/webhook-binary";

const running: RunningGateway[] = [];
afterAll(async () => {
  for (const gateway of running) if (gateway.proc.exitCode === null) await gateway.stop("SIGKILL");
});

async function start(dir: string, extra = "", args: string[] = ["--service-id", "9"], tail = ""): Promise<{ gateway: RunningGateway; hooks: string }> {
  const port = freePort();
  const gateway = await startGateway(`${webhooksToml(port, extra)}\n${tail}`, { dir, args });
  running.push(gateway);
  const hooks = `http://127.0.0.1:${port}`;
  expect(await (await fetch(`${hooks}/webhooks/health`)).text()).toBe("ok");
  return { gateway, hooks };
}

async function until(condition: () => boolean | Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(20);
  }
}

describe("durability under kill -9", () => {
  test("every 202 survives a kill -9 at a random moment, exactly once, over several rounds", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-durable-"));
    const acked = new Map<number, string>();
    let previousMax = 0;
    let last: RunningGateway | null = null;
    const rounds = 6;
    for (let round = 0; round < rounds; round++) {
      const { gateway, hooks } = await start(dir);
      last = gateway;
      let stop = false;
      let sent = 0;
      const roundIds: number[] = [];
      const worker = async (): Promise<void> => {
        while (!stop) {
          const body = JSON.stringify({ round, n: sent++, nonce: crypto.randomUUID() });
          try {
            const response = await send(hooks, body);
            if (response.status === 202) {
              const { call_id } = (await response.json()) as { call_id: number };
              acked.set(call_id, body);
              roundIds.push(call_id);
            }
          } catch {
            return; // the process is gone
          }
        }
      };
      const workers = Array.from({ length: 24 }, worker);
      await until(() => roundIds.length >= 20, "the first accepted requests");
      await Bun.sleep(Math.floor(Math.random() * 150)); // a random moment inside the burst
      gateway.proc.kill("SIGKILL");
      await gateway.proc.exited;
      stop = true;
      await Promise.all(workers);
      expect(Math.min(...roundIds)).toBeGreaterThan(previousMax);
      previousMax = Math.max(...roundIds);
    }
    const byId = await outboxBodies(last!);
    const bodyCounts = new Map<string, number>();
    for (const body of byId.values()) bodyCounts.set(body, (bodyCounts.get(body) ?? 0) + 1);
    expect(acked.size).toBeGreaterThan(rounds * 20);
    for (const [callId, body] of acked) {
      expect(byId.get(callId)).toBe(body);
      expect(bodyCounts.get(body)).toBe(1);
    }
  }, 60_000);
});

describe("the webhook feature in the binary", () => {
  test("a handler killed with the process is redelivered after its lease", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-redeliver-"));
    const marks = join(dir, "attempts");
    // The first attempt sleeps well past the kill below (which follows its mark within
    // milliseconds), and not so long that the orphaned sleep outlives the suite by much.
    const job = `[[jobs]]\njob_id = 3\ncommand = ["sh", "-c", "echo $X_GATEWAY_ATTEMPT >> ${marks}; [ $X_GATEWAY_ATTEMPT -ge 2 ] || sleep 5"]\ntimeout_ms = 60000\n`;
    // [[jobs]] sits at the top level of modelgate.toml, after the [webhooks] tables.
    const withJob = await start(dir, "", ["--service-id", "9"], job);
    const { hooks } = withJob;
    const response = await send(hooks, '{"work":1}');
    expect(response.status).toBe(202);
    const { call_id } = (await response.json()) as { call_id: number };
    await until(() => existsSync(marks) && readFileSync(marks, "utf8") === "1\n", "the first attempt to start");
    withJob.gateway.proc.kill("SIGKILL"); // the consumer dies mid-job
    await withJob.gateway.proc.exited;
    const restarted = (await start(dir, "", ["--service-id", "9"], job)).gateway;
    await until(async () => {
      const list = await restarted.cli(["jobs", "list", "--state", "done", "--json"]);
      return (JSON.parse(list.stdout) as Array<{ callId: number }>).some((j) => j.callId === call_id);
    }, "the redelivered call to finish");
    expect(readFileSync(marks, "utf8")).toBe("1\n2\n");
    await restarted.stop();
  }, 60_000);

  test("jobs list and retry, the status section, and the service_id note", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-jobs-cli-"));
    const { gateway, hooks } = await start(dir, "", []);
    // Said once, at info: only a Blueprint deployment needs a service id.
    const notes = gateway
      .output()
      .split("\n")
      .filter((line) => line.includes("service_id is 0"));
    expect(notes.map((line) => (JSON.parse(line) as { level: string }).level)).toEqual(["info"]);
    // No [[jobs]] handler and no pull token: the job its endpoint feeds is named at start.
    expect(gateway.output()).toMatch(/webhooks: job 3 \(\/[^)]*\) has no \[\[jobs\]\] handler and the pull API is off/);
    const response = await send(hooks, '{"a":1}');
    const { call_id } = (await response.json()) as { call_id: number };
    const table = await gateway.cli(["jobs", "list"]);
    expect(table.code).toBe(0);
    expect(table.stdout).toContain("CALL_ID");
    expect(table.stdout).toMatch(new RegExp(`^${call_id}\\s+3\\s+pending`, "m"));
    const status = (await (await fetch(`${gateway.url}/api/status`)).json()) as { webhooks: Record<string, unknown> };
    expect(status.webhooks.outbox_depth).toBe(1);
    expect(status.webhooks.pending).toBe(1);
    expect((await gateway.cli(["jobs", "list", "--state", "bogus"])).code).toBe(2);
    // A pending call is delivered by itself; retry is for done or dead calls.
    const retried = await gateway.cli(["jobs", "retry", String(call_id)]);
    expect(retried.code).toBe(1);
    expect(retried.stderr).toContain(`call ${call_id} is pending`);
    expect((await gateway.cli(["jobs", "retry", "987654"])).code).toBe(1);
    await gateway.stop();
  }, 30_000);

  test("a call whose last lease ran out is dead in the status without another claim (regression: it showed as pending until something claimed again)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-sweep-"));
    const { gateway, hooks } = await start(dir, 'max_attempts = 1\npull_token = "pull-token-123"\n');
    expect((await send(hooks, '{"alert":"once"}')).status).toBe(202);
    const claim = await fetch(`${hooks}/webhooks/jobs/claim`, {
      method: "POST",
      headers: { authorization: "Bearer pull-token-123" },
      body: JSON.stringify({ lease_ms: 100 }),
    });
    expect(((await claim.json()) as { jobs: unknown[] }).jobs).toHaveLength(1);
    const webhooks = async () => ((await (await fetch(`${gateway.url}/api/status`)).json()) as { webhooks: { pending: number; dead: number } }).webhooks;
    await until(async () => (await webhooks()).dead === 1, "the sweep to mark the call dead");
    expect(await webhooks()).toMatchObject({ pending: 0, dead: 1 });
    expect(gateway.output()).toContain("call(s) dead: the lease of their last attempt ran out");
  });

  test("a chunked body over the limit is 413 over real HTTP", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-413-"));
    const { gateway, hooks } = await start(dir, "max_body_bytes = 1000");
    // A raw socket, so the request is exactly three 600-byte chunks and no client library decides
    // what to do with an answer that comes before the upload ends.
    const { hostname, port } = new URL(hooks);
    const chunk = `258\r\n${"x".repeat(600)}\r\n`;
    const answer = await new Promise<string>((resolve, reject) => {
      let received = "";
      Bun.connect({
        hostname,
        port: Number(port),
        socket: {
          open(socket) {
            socket.write(
              `POST /hooks/alert HTTP/1.1\r\nhost: ${hostname}\r\ntransfer-encoding: chunked\r\nx-hub-signature-256: sha256=00\r\n\r\n${chunk.repeat(3)}0\r\n\r\n`,
            );
          },
          data(socket, data) {
            received += data.toString("latin1");
            if (received.includes("\r\n\r\n")) {
              socket.end();
              resolve(received);
            }
          },
          close: () => resolve(received),
          error: (_socket, error) => reject(error),
        },
      }).catch(reject);
    });
    expect(answer).toStartWith("HTTP/1.1 413");
    await gateway.stop();
  }, 30_000);

  test("a body far past the limit gets the JSON 413, not the HTTP layer's empty one", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-413-large-"));
    const { gateway, hooks } = await start(dir, "max_body_bytes = 1000");
    for (const size of [1001, 200_000, 3_000_000]) {
      const response = await send(hooks, "x".repeat(size));
      expect(response.status).toBe(413);
      expect(await response.json()).toEqual({ error: "payload_too_large", limit: 1000 });
    }
    await gateway.stop();
  }, 30_000);

  test("bodies over 64 KiB being read at once are bounded by max_body_bytes_in_flight, counted as they arrive (regression: read whole before the signature, without a bound)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-inflight-"));
    const { gateway, hooks } = await start(dir, "max_body_bytes = 200000\nmax_body_bytes_in_flight = 200000");
    const { hostname, port } = new URL(hooks);
    const stalled = async (declared: number, sent: string) => {
      const socket = await Bun.connect({ hostname, port: Number(port), socket: { data() {} } });
      socket.write(`POST /hooks/alert HTTP/1.1\r\nhost: x\r\nx-hub-signature-256: sha256=00\r\ncontent-length: ${declared}\r\n\r\n${sent}`);
      return socket;
    };
    // Idle senders that declared large bodies hold nothing.
    const idle = await Promise.all(Array.from({ length: 5 }, () => stalled(199_000, "{")));
    await Bun.sleep(100);
    const large = JSON.stringify({ alert: "x".repeat(100_000) });
    expect((await send(hooks, large)).status).toBe(202);
    // Two that sent 90 KB each leave no room for another 100 KB; a small body needs none.
    const slow = await Promise.all([stalled(150_000, "y".repeat(90_000)), stalled(150_000, "y".repeat(90_000))]);
    await Bun.sleep(100);
    const refused = await send(hooks, large);
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).toBe("5");
    expect((await send(hooks, '{"alert":"small"}')).status).toBe(202);
    for (const socket of [...idle, ...slow]) socket.end();
    await Bun.sleep(100);
    expect((await send(hooks, large)).status).toBe(202);
    await gateway.stop();
  }, 30_000);

  test("requests without a Host header (HTTP/1.0 health checks) reach their paths", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-no-host-"));
    const { gateway, hooks } = await start(dir);
    const { hostname, port } = new URL(hooks);
    const exchange = (request: string): Promise<string> =>
      new Promise((resolve, reject) => {
        let received = "";
        Bun.connect({
          hostname,
          port: Number(port),
          socket: {
            open: (socket) => void socket.write(request),
            data: (_socket, data) => void (received += data.toString("latin1")),
            close: () => resolve(received),
            error: (_socket, error) => reject(error),
          },
        }).catch(reject);
      });
    const health = await exchange("GET /webhooks/health HTTP/1.0\r\n\r\n");
    expect(health).toStartWith("HTTP/1.1 200");
    expect(health.endsWith("\r\n\r\nok")).toBe(true);
    const body = '{"a":1}';
    const accepted = await exchange(
      `POST /hooks/alert HTTP/1.0\r\ncontent-length: ${body.length}\r\nx-hub-signature-256: sha256=${signBody(WEBHOOK_SECRET, body)}\r\n\r\n${body}`,
    );
    expect(accepted).toStartWith("HTTP/1.1 202");
    expect(accepted).toContain('"job_id":3');
    await gateway.stop();
  }, 30_000);
});
