// `[[jobs]]` handlers: a command gets the body on stdin and the metadata in its environment and
// its exit code decides; a timeout kills it; a long job keeps its lease; `forward` POSTs with the
// metadata as headers and is retried until a 2xx.
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startJobRunner } from "../../src/webhooks/jobs";
import { buildTestGateway } from "./support";
import { freePort } from "../support/binary";

const out = mkdtempSync(join(tmpdir(), "modelgate-jobs-out-"));
const forwarded: Array<{ body: string; headers: Record<string, string> }> = [];
const receiver = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(request) {
    forwarded.push({ body: await request.text(), headers: Object.fromEntries(request.headers) });
    return new Response(null, { status: forwarded.length === 1 ? 500 : 200 });
  },
});

const t = buildTestGateway(
  {
    endpoints: [
      { path: "/cmd", job_id: 1, name: "Command hook" },
      { path: "/flaky", job_id: 2 },
      { path: "/slow", job_id: 3 },
      { path: "/hang", job_id: 4 },
      { path: "/fwd", job_id: 5, name: "Forwarded" },
      { path: "/orphan", job_id: 6 },
      { path: "/stopping", job_id: 7 },
      { path: "/leaky", job_id: 8 },
      { path: "/leaky-forward", job_id: 9 },
      { path: "/leaky-tail", job_id: 10 },
      { path: "/leaky-repeat", job_id: 11 },
      { path: "/unnamed", job_id: 12 },
      { path: "/keyed-url", job_id: 13 },
      { path: "/keyed-url-refused", job_id: 14 },
      { path: "/keyed-url-garbage", job_id: 15 },
      { path: "/stopping-forward", job_id: 16 },
    ],
    lease_ms: 300,
    max_attempts: 3,
    backoff_ms: 0,
  },
  {
    realClock: true,
    jobs: [
      { job_id: 1, command: ["sh", "-c", `cat > "${out}/$X_GATEWAY_CALL_ID.body"; env | grep '^X_' | sort > "${out}/$X_GATEWAY_CALL_ID.env"`] },
      { job_id: 2, command: ["sh", "-c", 'echo "try $X_GATEWAY_ATTEMPT" >&2; [ "$X_GATEWAY_ATTEMPT" -ge 2 ]'] },
      { job_id: 3, command: ["sh", "-c", `echo run >> "${out}/slow.runs"; sleep 1`], timeout_ms: 10_000 },
      { job_id: 4, command: ["sleep", "30"], timeout_ms: 150 },
      { job_id: 5, forward: `http://127.0.0.1:${receiver.port}/hook`, timeout_ms: 5_000 },
      // The shell is the handler; the sleep it starts holds stderr open for 30 s unless it is killed too.
      { job_id: 6, command: ["sh", "-c", `sleep 30 & echo $! >> "${out}/orphans"; wait`], timeout_ms: 200 },
    ],
    serviceId: 7,
  },
);
const runner = startJobRunner(t.outbox, t.config.jobs, { leaseMs: t.config.webhooks.lease_ms, pollMs: 20 });
afterAll(async () => {
  await runner.stop(2_000);
  receiver.stop(true);
  t.close();
});

async function enqueue(path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<number> {
  const response = await t.post(path, body, { "content-type": "text/plain", ...headers });
  expect(response.status).toBe(202);
  return ((await response.json()) as { call_id: number }).call_id;
}

/** A call's row; `spent`: the attempts its budget has used (attempts - attempt_base). */
function row(callId: number): { state: string; attempts: number; spent: number; last_error: string | null } {
  return t.outbox.sqlite
    .query<{ state: string; attempts: number; spent: number; last_error: string | null }, [number]>(
      "SELECT state, attempts, attempts - attempt_base AS spent, last_error FROM webhook_jobs WHERE call_id = ?",
    )
    .get(callId)!;
}

/** Waits for a condition (not for time): polls until it holds or a generous deadline passes. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(10);
  }
}

describe("command handlers", () => {
  test("body on stdin byte for byte, metadata in the environment, exit 0 acks", async () => {
    const body = new Uint8Array([0x7b, 0x22, 0xc3, 0xa9, 0x22, 0x7d, 0x0a, 0x00, 0xff]);
    const callId = await enqueue("/cmd", body);
    await until(() => row(callId).state === "done", "the command call to finish");
    expect(readFileSync(join(out, `${callId}.body`)).equals(Buffer.from(body))).toBe(true);
    const env = readFileSync(join(out, `${callId}.env`), "utf8")
      .trim()
      .split("\n");
    expect(env).toEqual([
      "X_GATEWAY_ATTEMPT=1",
      `X_GATEWAY_CALL_ID=${callId}`,
      "X_GATEWAY_JOB_ID=1",
      "X_GATEWAY_SERVICE_ID=7",
      "X_WEBHOOK_NAME=Command hook",
      "X_WEBHOOK_ORIGIN=webhook",
      "X_WEBHOOK_PATH=/cmd",
    ]);
  });

  test("GitHub's event and delivery id reach a command as X_WEBHOOK_GITHUB_EVENT and X_WEBHOOK_GITHUB_DELIVERY", async () => {
    const callId = await enqueue("/cmd", "{}", { "x-github-event": "workflow_run", "x-github-delivery": "d-1", "x-hub-signature-256": "sha256=ab" });
    await until(() => row(callId).state === "done", "the command call to finish");
    const env = readFileSync(join(out, `${callId}.env`), "utf8")
      .trim()
      .split("\n");
    expect(env.filter((line) => line.startsWith("X_WEBHOOK_GITHUB") || line.includes("SIGNATURE"))).toEqual([
      "X_WEBHOOK_GITHUB_DELIVERY=d-1",
      "X_WEBHOOK_GITHUB_EVENT=workflow_run",
    ]);
  });

  test("a non-zero exit fails the attempt and the call is retried", async () => {
    const callId = await enqueue("/flaky", "x");
    await until(() => row(callId).state === "done", "the flaky call to succeed on its second attempt");
    expect(row(callId).attempts).toBe(2);
  });

  test("a job longer than the lease keeps its lease and runs once", async () => {
    const callId = await enqueue("/slow", "x");
    await until(() => row(callId).state === "done", "the slow call to finish");
    expect(row(callId).attempts).toBe(1);
    expect(readFileSync(join(out, "slow.runs"), "utf8")).toBe("run\n");
  });

  test("a command past timeout_ms is killed; after max_attempts the call is dead", async () => {
    const callId = await enqueue("/hang", "x");
    await until(() => row(callId).state === "dead", "the hanging call to die");
    expect(row(callId).attempts).toBe(3);
    expect(row(callId).last_error).toBe("killed (timeout 150 ms)");
  });

  test("a timeout kills what the command started too, and its open stderr does not hold the attempt", async () => {
    const callId = await enqueue("/orphan", "x");
    await until(() => row(callId).state === "dead", "the call whose command left a process behind to die");
    expect(row(callId).attempts).toBe(3);
    expect(row(callId).last_error).toBe("killed (timeout 200 ms)");
    const pids = readFileSync(join(out, "orphans"), "utf8").trim().split("\n").map(Number);
    expect(pids).toHaveLength(3);
    for (const pid of pids) expect(running(pid)).toBe(false);
  });
});

const LONG_SECRET = "0123456789abcdef".repeat(4);

describe("secrets", () => {
  test("a command does not inherit the variables the config reads secrets from, and no failure reason shows a secret value", async () => {
    process.env.MG_TEST_SECRET = "s3cr3t-value-42";
    const secretUrl = `http://127.0.0.1:${freePort()}/hook/T000-secret-path`;
    const lines: string[] = [];
    const own = startJobRunner(
      t.outbox,
      [
        { job_id: 8, command: ["sh", "-c", 'echo "env=[$MG_TEST_SECRET] literal=s3cr3t-value-42" >&2; exit 3'], timeout_ms: 5_000, concurrency: 1 },
        { job_id: 9, forward: secretUrl, timeout_ms: 5_000, concurrency: 1 },
        // The secret straddles where the 500-character tail of stderr begins.
        {
          job_id: 10,
          command: ["sh", "-c", `printf 'A%.0s' $(seq 100) >&2; printf 's3cr3t-value-42' >&2; printf 'B%.0s' $(seq 495) >&2; exit 3`],
          timeout_ms: 5_000,
          concurrency: 1,
        },
        // A long secret printed many times: the kept tail starts inside one of them.
        { job_id: 11, command: ["sh", "-c", `for i in $(seq 40); do printf 'auth=${LONG_SECRET}\\n' >&2; done; exit 2`], timeout_ms: 5_000, concurrency: 1 },
      ],
      {
        leaseMs: 300,
        pollMs: 20,
        secretValues: new Set(["s3cr3t-value-42", secretUrl, LONG_SECRET]),
        secretEnv: new Set(["MG_TEST_SECRET"]),
        log: (_level, msg, fields) => void lines.push(`${msg} ${JSON.stringify(fields)}`),
      },
    );
    try {
      const command = await enqueue("/leaky", "x");
      const forward = await enqueue("/leaky-forward", "x");
      const tail = await enqueue("/leaky-tail", "x");
      const repeat = await enqueue("/leaky-repeat", "x");
      // A claim counts the attempt; the failure's reason is written when the command has ended.
      await until(() => [command, forward, tail, repeat].every((id) => row(id).last_error !== null), "the calls to fail once");
      // Regression: the cut before redaction left the last 19 characters of one at the start.
      expect(row(repeat).last_error).toMatch(/^exit code 2: (auth=\[redacted\]\n?)+$/);
      // Redacted before it was cut (regression: the cut kept the secret's end, "value-42").
      expect(row(tail).last_error).toMatch(/^exit code 3: [a-z\]]*B{495}$/);
      expect(row(tail).last_error).not.toContain("42");
      expect(row(command).last_error).toBe("exit code 3: env=[] literal=[redacted]");
      // The URL shows as `config check` shows it, its path (here the key) hidden.
      expect(row(forward).last_error).toStartWith(`http://127.0.0.1:${new URL(secretUrl).port}/<redacted>: `);
      expect(lines.join("\n")).not.toContain("s3cr3t-value-42");
      expect(lines.join("\n")).not.toContain("T000-secret-path");
    } finally {
      await own.stop(1_000);
      delete process.env.MG_TEST_SECRET;
    }
  });

  test("a forward URL written out in the config shows without its user, password, path or query in failure reasons (regression: shown whole)", async () => {
    const failing = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null, { status: 500 }) });
    // Not HTTP at all: Bun's error quotes the URL it fetched, normalised (regression: that copy showed whole).
    const garbage = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (socket) => void socket.end("NOTHTTP garbage\r\n\r\n") } });
    const closedPort = freePort();
    const keyed = (port: number): string => `http://hook-user:pw-SECRETX@127.0.0.1:${port}/hook/it's-tok-SECRETPATH?token=qs-SECRETQ#frag`; // a quote stays as it is in a URL's path
    const lines: string[] = [];
    const own = startJobRunner(
      t.outbox,
      [
        { job_id: 13, forward: keyed(failing.port!), timeout_ms: 5_000, concurrency: 1 },
        { job_id: 14, forward: keyed(closedPort), timeout_ms: 5_000, concurrency: 1 },
        { job_id: 15, forward: keyed(garbage.port), timeout_ms: 5_000, concurrency: 1 },
      ],
      { leaseMs: 300, pollMs: 20, log: (_level, msg, fields) => void lines.push(`${msg} ${JSON.stringify(fields)}`) },
    );
    try {
      const answered = await enqueue("/keyed-url", "x");
      const refused = await enqueue("/keyed-url-refused", "x");
      const malformed = await enqueue("/keyed-url-garbage", "x");
      await until(() => [answered, refused, malformed].every((id) => row(id).last_error !== null), "the calls to fail once");
      expect(row(malformed).last_error).toStartWith(`http://<redacted>:<redacted>@127.0.0.1:${garbage.port}/<redacted>?<redacted>#<redacted>: `);
      expect(row(answered).last_error).toBe(`HTTP 500 from http://<redacted>:<redacted>@127.0.0.1:${failing.port!}/<redacted>?<redacted>#<redacted>`);
      expect(row(refused).last_error).toStartWith(`http://<redacted>:<redacted>@127.0.0.1:${closedPort}/<redacted>?<redacted>#<redacted>: `);
      expect(`${row(answered).last_error} ${row(refused).last_error} ${row(malformed).last_error} ${lines.join("\n")}`).not.toContain("SECRET");
    } finally {
      await own.stop(1_000);
      failing.stop(true);
      garbage.stop(true);
    }
  });
});

describe("stopping the runner", () => {
  test("commands still running after the grace are killed, group and all (regression: they outlived the stop)", async () => {
    // A runner of its own, for job 7 only, stopped while its command (a shell and its sleep) runs.
    const pidFile = join(out, "stopping.pid");
    const own = startJobRunner(
      t.outbox,
      [{ job_id: 7, command: ["sh", "-c", `sleep 30 & echo $! > "${pidFile}"; wait`], timeout_ms: 60_000, concurrency: 1 }],
      { leaseMs: 300, pollMs: 20 },
    );
    const callId = await enqueue("/stopping", "x");
    await until(() => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "", "the command to start");
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    expect(running(pid)).toBe(true);
    await own.stop(100);
    await until(() => !running(pid), "the command's sleep to be killed");
    // The stop ended it, not the command: the call is handed back with its attempt (regression: two
    // stops during a long command spent both attempts, and the call died without ever failing).
    expect(row(callId)).toMatchObject({ state: "pending", attempts: 1, spent: 0 });
  });

  test("a forward still waiting after the grace is given up and its call handed back with its attempt (regression: left leased, its attempt spent, and the stop waited on)", async () => {
    let arrived = false;
    const silent = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => ((arrived = true), new Promise<Response>(() => {})) });
    const own = startJobRunner(t.outbox, [{ job_id: 16, forward: `http://127.0.0.1:${silent.port}/hook`, timeout_ms: 60_000, concurrency: 1 }], {
      leaseMs: 300,
      pollMs: 20,
    });
    try {
      const callId = await enqueue("/stopping-forward", "x");
      await until(() => arrived, "the forward to reach its receiver");
      await own.stop(100);
      expect(row(callId)).toMatchObject({ state: "pending", attempts: 1, spent: 0 });
    } finally {
      silent.stop(true);
    }
  });

  test("a metadata variable the call does not carry is not inherited from the gateway's environment", async () => {
    process.env.X_WEBHOOK_NAME = "from-the-parent";
    const own = startJobRunner(
      t.outbox,
      [{ job_id: 12, command: ["sh", "-c", `echo "\${X_WEBHOOK_NAME-unset}" > "${out}/unnamed"`], timeout_ms: 5_000, concurrency: 1 }],
      { leaseMs: 300, pollMs: 20 },
    );
    try {
      const callId = await enqueue("/unnamed", "x");
      await until(() => row(callId).state === "done", "the unnamed call to finish");
      expect(readFileSync(join(out, "unnamed"), "utf8").trim()).toBe("unset");
    } finally {
      delete process.env.X_WEBHOOK_NAME;
      await own.stop(1_000);
    }
  });
});

/** Whether `pid` is a live process (a killed one not yet reaped is a zombie, "Z"). */
function running(pid: number): boolean {
  try {
    return !readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].startsWith("Z");
  } catch {
    return false;
  }
}

describe("forward handlers", () => {
  test("POSTs the body with metadata headers; a 500 is retried until a 2xx", async () => {
    const callId = await enqueue("/fwd", '{"ping":1}');
    await until(() => row(callId).state === "done", "the forwarded call to be acknowledged");
    expect(row(callId).attempts).toBe(2);
    expect(forwarded).toHaveLength(2);
    const last = forwarded[1];
    expect(last.body).toBe('{"ping":1}');
    expect(last.headers["content-type"]).toBe("text/plain");
    expect(last.headers["x-gateway-service-id"]).toBe("7");
    expect(last.headers["x-gateway-call-id"]).toBe(String(callId));
    expect(last.headers["x-webhook-path"]).toBe("/fwd");
    expect(last.headers["x-webhook-name"]).toBe("Forwarded");
    expect(last.headers["x-webhook-origin"]).toBe("webhook");
    expect(last.headers["x-gateway-attempt"]).toBe("2");
  });
});
