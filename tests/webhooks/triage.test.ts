// Alert triage in-process: recognising each sender's body (captured payloads written from the
// services' documented formats), the prompt's variables, and the config checks of triage jobs.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig, ConfigError } from "../../src/config/load";
import { redactedConfig } from "../../src/config/redact";
import { parseAlert } from "../../src/webhooks/triage/parse";
import { renderPrompt } from "../../src/webhooks/triage/prompt";

function fixture(name: string): Uint8Array {
  return readFileSync(join(import.meta.dir, "fixtures", name));
}

function parsed(body: string | Uint8Array) {
  return parseAlert({ body: typeof body === "string" ? new TextEncoder().encode(body) : body, contentType: "application/json" });
}

describe("recognising the sender", () => {
  test("a Grafana contact point's alert group", () => {
    const group = parsed(fixture("grafana-firing.json"));
    expect(group.kind).toBe("grafana");
    expect(group.status).toBe("firing");
    expect(group.severity).toBe("warning");
    expect(group.title).toBe("[FIRING:1] High CPU Infra (web-2 warning)");
    expect(group.alerts[0].summary).toBe("CPU above 90% for 5 minutes");
    expect(group.dedupeKey).toBe("firing|a1b2c3d4e5f60718:firing");
  });

  test("Uptime Kuma: down is firing, up resolves the same monitor, a test message is info", () => {
    const down = parsed(fixture("uptime-kuma-down.json"));
    const up = parsed(fixture("uptime-kuma-up.json"));
    expect([down.kind, down.status, down.title, down.severity]).toEqual(["uptime-kuma", "firing", "Shop frontend is down", "critical"]);
    expect([up.status, up.title]).toEqual(["resolved", "Shop frontend is up"]);
    expect(up.groupKey).toBe(down.groupKey!);
    const probe = parsed(fixture("uptime-kuma-test.json"));
    expect([probe.status, probe.title, probe.groupKey]).toEqual(["info", "Uptime Kuma Webhook Testing", null]);
  });

  test("a GitHub event without its X-GitHub-Event header is guessed from the body", () => {
    const body = JSON.stringify({
      action: "opened",
      pull_request: { title: "Fix the cache", number: 4 },
      repository: { full_name: "acme/shop" },
      sender: { login: "octocat" },
    });
    const group = parsed(body);
    expect([group.kind, group.event]).toEqual(["github", "pull_request"]);
    expect(group.title).toBe('acme/shop pull request #4 "Fix the cache" opened by octocat');
  });

  test("X-GitHub-Event decides, whatever the body looks like, and a form-encoded payload is read", () => {
    const github = (event: string, body: string, contentType = "application/json") =>
      parseAlert({ body: new TextEncoder().encode(body), contentType, headers: { "x-github-event": event } });
    const run = {
      workflow_run: { name: "CI", head_branch: "main", status: "completed", conclusion: "failure" },
      repository: { full_name: "acme/shop" },
      sender: { login: "octocat" },
      action: "completed",
    };
    expect(github("workflow_run", JSON.stringify(run))).toMatchObject({
      kind: "github",
      event: "workflow_run",
      status: "firing",
      severity: "warning",
      title: 'acme/shop workflow run "CI" on main: failure completed by octocat',
    });
    const issue = { action: "opened", issue: { number: 12, title: "Checkout 500s" }, repository: { full_name: "acme/shop" }, sender: { login: "ana" } };
    expect(github("issues", `payload=${encodeURIComponent(JSON.stringify(issue))}`, "application/x-www-form-urlencoded")).toMatchObject({
      event: "issues",
      status: "info",
      title: 'acme/shop issue #12 "Checkout 500s" opened by ana',
    });
    // An Alertmanager-shaped body sent with the header is still GitHub's (the header is what GitHub sets).
    expect(github("ping", JSON.stringify({ alerts: [], groupKey: "g", zen: "Keep it logically awesome." }))).toMatchObject({
      kind: "github",
      event: "ping",
      title: "ping (the webhook was set up)",
    });
    expect(github("push", "not json")).toMatchObject({ kind: "github", event: "push", title: "push of 0 commits to ?" });
  });

  test("the GitHub prompt names the event and what to say about a common one; another event gets the template alone", () => {
    const prompt = (event: string) =>
      renderPrompt(undefined, {
        group: parseAlert({ body: new TextEncoder().encode("{}"), contentType: "application/json", headers: { "x-github-event": event } }),
        body: "{}",
        endpoint: "/hooks/gh",
        name: null,
      });
    expect(prompt("pull_request")).toContain("GitHub event: pull_request");
    expect(prompt("pull_request")).toContain("whether a review is wanted");
    expect(prompt("deployment_status")).toContain("GitHub event: deployment_status");
    expect(prompt("constructor")).not.toContain("function");
    expect(prompt("constructor").split("\n")[1]).toBe("");
  });

  test("other JSON, text, and bytes that are neither are triaged, never dropped", () => {
    expect(parsed('{"title":"Backup done","level":"error"}')).toMatchObject({ kind: "json", title: "Backup done", severity: "critical" });
    expect(parsed("[1,2,3]")).toMatchObject({ kind: "json", title: "JSON notification" });
    expect(parsed("disk full\nsecond line")).toMatchObject({ kind: "text", title: "disk full" });
    expect(parsed(new Uint8Array([0xff, 0xfe, 0x00, 0x41]))).toMatchObject({ kind: "text" });
    expect(parsed("")).toMatchObject({ kind: "text", title: "(empty body)" });
  });

  test("the prompt's variables are filled from the alert", () => {
    const group = parsed(fixture("uptime-kuma-down.json"));
    const prompt = renderPrompt("{{kind}}|{{status}}|{{severity}}|{{alert_count}}|{{endpoint}}|{{name}}|{{title}}", {
      group,
      body: "",
      endpoint: "/hooks/kuma",
      name: "Kuma",
    });
    expect(prompt).toBe("uptime-kuma|firing|critical|1|/hooks/kuma|Kuma|Shop frontend is down");
  });
});

describe("config of a triage job", () => {
  const endpoints = [{ path: "/hooks/am", job_id: 1, auth: "bearer", secret: "am-token" }];
  const raw = (job: Record<string, unknown>) => ({ webhooks: { enabled: true, endpoints }, jobs: [{ job_id: 1, ...job }] });

  test("a prompt file naming an unknown variable stops start-up, naming it", () => {
    const dir = mkdtempSync(join(tmpdir(), "triage-prompt-"));
    writeFileSync(join(dir, "triage.md"), "Alert {{title}} on {{hostname}}");
    const load = () =>
      buildConfig(raw({ triage: { model: "m", prompt: "file:triage.md" }, notify: [{ kind: "slack", url: "https://hooks.slack.com/services/T/B/x" }] }), {
        env: {},
        baseDir: dir,
      });
    expect(load).toThrow(ConfigError);
    expect(load).toThrow(/jobs\[0\]\.triage\.prompt \(.*triage\.md\): unknown variable \{\{hostname\}\}/);
  });

  test("a prompt naming a property every object has ({{constructor}}) is refused as unknown", () => {
    const load = () =>
      buildConfig(raw({ triage: { model: "m", prompt: "{{title}} {{constructor}}" }, notify: [{ kind: "ntfy", url: "https://ntfy.sh/alerts" }] }), { env: {} });
    expect(load).toThrow(/unknown variable \{\{constructor\}\}/);
  });

  test("a prompt file with known variables is read in place", () => {
    const dir = mkdtempSync(join(tmpdir(), "triage-prompt-"));
    writeFileSync(join(dir, "triage.md"), "Alert {{ title }} ({{severity}})");
    const { config } = buildConfig(raw({ triage: { model: "m", prompt: "file:triage.md" }, notify: [{ kind: "ntfy", url: "https://ntfy.sh/alerts" }] }), {
      env: {},
      baseDir: dir,
    });
    expect(config.jobs[0].triage!.prompt).toBe("Alert {{ title }} ({{severity}})");
    expect(config.jobs[0].triage!.wait_ms).toBe(30_000);
    expect(config.jobs[0].triage!.storm_per_minute).toBe(20);
  });

  test("each notifier kind's required keys, and notify only with triage", () => {
    expect(() =>
      buildConfig(raw({ triage: { model: "m" }, notify: [{ kind: "matrix", homeserver: "https://m.example", room: "!r:m.example" }] }), { env: {} }),
    ).toThrow('jobs[0].notify[0].token: required for kind "matrix"');
    expect(() => buildConfig(raw({ triage: { model: "m" }, notify: [{ kind: "gotify", url: "https://g.example" }] }), { env: {} })).toThrow(
      'jobs[0].notify[0].token: required for kind "gotify"',
    );
    expect(() => buildConfig(raw({ triage: { model: "m" }, notify: [{ kind: "pager", url: "https://x" }] }), { env: {} })).toThrow(
      'jobs[0].notify[0].kind: must be one of "slack", "discord", "ntfy", "gotify", "matrix", "webhook" (got "pager")',
    );
    expect(() => buildConfig(raw({ triage: { model: "m" } }), { env: {} })).toThrow(/jobs\[0\]\.notify: a triage job needs at least one target/);
    expect(() => buildConfig(raw({ forward: "https://x.example", notify: [{ kind: "slack", url: "https://x" }] }), { env: {} })).toThrow(
      /jobs\[0\]\.notify: only a "triage" job notifies/,
    );
    expect(() => buildConfig(raw({ forward: "https://x.example", triage: { model: "m" } }), { env: {} })).toThrow(
      'jobs[0]: set exactly one of "command", "forward" or "triage"',
    );
  });

  test("config check shows no notifier secret: webhook URL paths and tokens are redacted", () => {
    const loaded = buildConfig(
      raw({
        triage: { model: "m", as_user: "alerts@example.com" },
        notify: [
          { kind: "slack", url: "env:SLACK_URL" },
          { kind: "discord", url: "https://discord.com/api/webhooks/123/discordsecret456" },
          { kind: "matrix", homeserver: "https://matrix.example", room: "!ops:example", token: "env:MATRIX_TOKEN" },
          { kind: "gotify", url: "https://gotify.example", token: "gotify-literal-token" },
        ],
      }),
      { env: { SLACK_URL: "https://hooks.slack.com/services/T01/B02/slacksecret123", MATRIX_TOKEN: "syt_matrix_secret" } },
    );
    const shown = JSON.stringify(redactedConfig(loaded));
    for (const secret of ["slacksecret123", "discordsecret456", "syt_matrix_secret", "gotify-literal-token"]) expect(shown).not.toContain(secret);
    expect(shown).toContain("discord.com");
    expect(loaded.secretValues.has("syt_matrix_secret")).toBe(true);
  });
});
