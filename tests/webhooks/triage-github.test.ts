// Alert triage against the compiled binary, part two: a GitHub delivery signed as GitHub signs it
// is recognised by its X-GitHub-Event header (stored with the call; headers off the allowlist are
// not), and a config reload (SIGHUP) that adds a triage job, then changes its notify targets.
import { afterAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sign } from "@octokit/webhooks-methods";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { eventually } from "../support/eventually";
import { startReceivers, type Receivers } from "./triage-support";

const GITHUB_SECRET = "gh-webhook-secret-7";
const TOKEN = "am-bearer-token-7";
const cleanups: Array<() => unknown> = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

function config(hooksPort: number, mock: MockUpstream, jobs: string): string {
  return `[webhooks]
enabled = true
bind_address = "127.0.0.1:${hooksPort}"
lease_ms = 1000
backoff_ms = 100

[[webhooks.endpoints]]
path = "/hooks/github"
job_id = 2
auth = "hmac-sha256"
secret = "${GITHUB_SECRET}"

[[webhooks.endpoints]]
path = "/hooks/alertmanager"
job_id = 1
auth = "bearer"
secret = "${TOKEN}"

[[upstreams]]
name = "mock"
base_url = "${mock.url}"

[[models]]
id = "triage-model"
targets = [{ upstream = "mock", model = "mock-small" }]
free = true
${jobs}`;
}

function triageJob(jobId: number, notify: string): string {
  return `\n[[jobs]]\njob_id = ${jobId}\ntimeout_ms = 2000\ntriage = { model = "triage-model", wait_ms = 600 }\nnotify = ${notify}\n`;
}

/** `jobs`: the [[jobs]] tables, given the receivers' URL. */
async function start(
  jobs: (receiversUrl: string) => string,
): Promise<{ gateway: RunningGateway; hooks: string; mock: MockUpstream; receivers: Receivers; hooksPort: number }> {
  const mock = startMockUpstream({ words: ["Summary", " here."] });
  const receivers = startReceivers();
  cleanups.push(
    () => mock.stop(),
    () => receivers.stop(),
  );
  const hooksPort = freePort();
  const gateway = await startGateway(config(hooksPort, mock, jobs(receivers.url)));
  cleanups.push(() => gateway.proc.exitCode === null && gateway.stop("SIGKILL"));
  return { gateway, hooks: `http://127.0.0.1:${hooksPort}`, mock, receivers, hooksPort };
}

function rows<T>(gateway: RunningGateway, sql: string): T[] {
  const db = new Database(join(gateway.dir, "data", "modelgate.db"), { readonly: true });
  try {
    return db.query<T, []>(sql).all();
  } finally {
    db.close();
  }
}

function prompts(mock: MockUpstream): string[] {
  return mock.requests.filter((r) => r.path.endsWith("/chat/completions")).map((r) => String(r.body.messages[0].content));
}

test("a GitHub push signed with X-Hub-Signature-256 is triaged as a push by its X-GitHub-Event; only allowlisted headers are stored", async () => {
  const { gateway, hooks, mock, receivers } = await start((url) => triageJob(2, `[{ kind = "slack", url = "${url}/slack/T/B/gh" }]`));
  // The push payload has no object that names its event (no pull_request, issue, workflow_run): only the header says "push".
  const payload = JSON.stringify({
    ref: "refs/heads/main",
    before: "a1",
    after: "b2",
    forced: false,
    commits: [
      { id: "b2", message: "Fix cache eviction" },
      { id: "c3", message: "Bump version" },
    ],
    head_commit: { id: "c3", message: "Bump version\n\nsigned-off" },
    repository: { full_name: "acme/shop" },
    pusher: { name: "octocat" },
    sender: { login: "octocat" },
  });
  const response = await fetch(`${hooks}/hooks/github`, {
    method: "POST",
    body: payload,
    headers: {
      "content-type": "application/json",
      "user-agent": "GitHub-Hookshot/044aadd",
      "x-github-event": "push",
      "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      "x-github-hook-id": "292430182",
      "x-hub-signature-256": await sign(GITHUB_SECRET, payload),
      authorization: "Bearer not-for-the-outbox",
    },
  });
  expect(response.status).toBe(202);
  expect(await eventually(() => receivers.of("slack").length === 1, 20_000)).toBe(true);

  const [alert] = rows<{ kind: string; title: string }>(gateway, "SELECT kind, title FROM triage_alerts");
  expect(alert.kind).toBe("github");
  expect(alert.title).toBe('acme/shop push of 2 commits to main "Bump version" by octocat');
  const [prompt] = prompts(mock);
  expect(prompt).toContain("GitHub event: push");
  expect(prompt).toContain("Say which branch, how many commits and by whom");

  const [stored] = rows<{ headers: string }>(gateway, "SELECT headers FROM webhook_jobs");
  expect(JSON.parse(stored.headers)).toEqual({
    "x-github-event": "push",
    "x-github-delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
    "user-agent": "GitHub-Hookshot/044aadd",
  });
  expect(stored.headers).not.toContain("not-for-the-outbox");
  expect(stored.headers).not.toContain("sha256=");
}, 40_000);

test("a reload adds a triage job (a call waiting for it is triaged), then changes its notify targets: new alerts go to the new ones", async () => {
  const { gateway, hooks, mock, receivers, hooksPort } = await start(() => "");
  const slack = `[{ kind = "slack", url = "${receivers.url}/slack/T/B/first" }]`;
  const ntfy = `[{ kind = "ntfy", url = "${receivers.url}/ntfy/second" }]`;
  const reloads = async (): Promise<number> => ((await (await fetch(`${gateway.url}/api/status`)).json()) as { config_reloads: number }).config_reloads;
  const reload = async (jobs: string, count: number): Promise<void> => {
    writeFileSync(
      join(gateway.dir, "modelgate.toml"),
      `[server]\nlisten = "127.0.0.1:${gateway.port}"\ndata_dir = "${join(gateway.dir, "data")}"\n${config(hooksPort, mock, jobs)}`,
    );
    gateway.proc.kill("SIGHUP");
    expect(await eventually(async () => (await reloads()) === count, 10_000)).toBe(true);
  };
  const post = (body: string): Promise<Response> =>
    fetch(`${hooks}/hooks/alertmanager`, { method: "POST", body, headers: { authorization: `Bearer ${TOKEN}` } });

  expect((await post("disk full on db-1")).status).toBe(202);
  await reload(triageJob(1, slack), 1);
  expect(await eventually(() => receivers.of("slack").length === 1, 20_000)).toBe(true);
  expect(receivers.of("slack")[0].text).toContain("disk full on db-1");

  await reload(triageJob(1, ntfy), 2);
  expect((await post("memory low on db-2")).status).toBe(202);
  expect(await eventually(() => receivers.of("ntfy").length === 1, 20_000)).toBe(true);
  expect(receivers.of("ntfy")[0].text).toContain("memory low on db-2");
  expect(receivers.of("slack").length).toBe(1);
  expect(rows<{ n: number }>(gateway, "SELECT count(*) AS n FROM triage_alerts")[0].n).toBe(2);
}, 60_000);
