// The webhook config: the Blueprint SDK crate's webhooks.toml loads unchanged, inline keys work,
// and every validation error is a ConfigError naming the key path.
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig, ConfigError, loadConfig } from "../../src/config/load";
import { redactedConfig } from "../../src/config/redact";
import { doneRetentionMs, unconsumedJobs } from "../../src/webhooks";

const CRATE_FILE = `# webhooks.toml as documented by the blueprint-webhooks crate
bind_address = "127.0.0.1:9091"

[[endpoints]]
path = "/hooks/tradingview"
job_id = 30
auth = "hmac-sha256"
secret = "my-secret-key"

[[endpoints]]
path = "/hooks/price-alert"
job_id = 7
auth = "bearer"
secret = "env:PRICE_ALERT_TOKEN"
name = "Price Alert"

[[endpoints]]
path = "/hooks/legacy"
job_id = 9
auth = "api-key"
secret = "k"
api_key_header = "X-Legacy-Key"

[[endpoints]]
path = "/hooks/open"
job_id = 1
`;

function dirWith(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-wh-config-"));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

function configError(raw: Record<string, unknown>, env: Record<string, string> = {}): string {
  try {
    buildConfig(raw, { env });
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

const on = (endpoints: unknown[], extra: Record<string, unknown> = {}) => ({ webhooks: { enabled: true, endpoints, ...extra } });

describe("loading", () => {
  test("a crate-format webhooks.toml loads unchanged via [webhooks] config, relative to the main file", () => {
    const dir = dirWith({
      "webhooks.toml": CRATE_FILE,
      "modelgate.toml": `[webhooks]\nenabled = true\nconfig = "webhooks.toml"\n`,
    });
    const { config } = loadConfig(join(dir, "modelgate.toml"), { PRICE_ALERT_TOKEN: "from-env" });
    const w = config.webhooks;
    expect(w.bind_address).toBe("127.0.0.1:9091");
    expect(w.endpoints.map((e) => [e.path, e.job_id, e.auth])).toEqual([
      ["/hooks/tradingview", 30, "hmac-sha256"],
      ["/hooks/price-alert", 7, "bearer"],
      ["/hooks/legacy", 9, "api-key"],
      ["/hooks/open", 1, "none"],
    ]);
    expect(w.endpoints[0].secret).toBe("my-secret-key");
    expect(w.endpoints[1].secret).toBe("from-env");
    expect(w.endpoints[1].name).toBe("Price Alert");
    expect(w.endpoints[2].api_key_header).toBe("X-Legacy-Key");
    expect(w.max_body_bytes).toBe(1_048_576);
  });

  test("env: in webhooks.toml and in [webhooks] config resolve as they do inline (regression: a path from env: was refused unresolved, the file name read literally)", () => {
    const dir = dirWith({
      "hooks.toml": `[[endpoints]]\npath = "env:HOOK_PATH"\njob_id = 3\nauth = "bearer"\nsecret = "env:HOOK_TOKEN"\n`,
      "modelgate.toml": `[webhooks]\nenabled = true\nconfig = "env:WEBHOOKS_FILE"\n`,
    });
    const { config } = loadConfig(join(dir, "modelgate.toml"), { WEBHOOKS_FILE: "hooks.toml", HOOK_PATH: "/hooks/from-env", HOOK_TOKEN: "token-from-env" });
    expect(config.webhooks.endpoints.map((e) => [e.path, e.job_id, e.secret])).toEqual([["/hooks/from-env", 3, "token-from-env"]]);
    // A bad value from the environment is named with the file, as a bad literal is.
    expect(() => loadConfig(join(dir, "modelgate.toml"), { WEBHOOKS_FILE: "hooks.toml", HOOK_PATH: "no-slash", HOOK_TOKEN: "t" })).toThrow(
      `${join(dir, "hooks.toml")}: endpoints[0].path: must start with "/"`,
    );
  });

  test("every error about a key the file set names the file: types, unknown keys and unset variables too (regression: they named webhooks.endpoints[…], which is in no file)", () => {
    // A "$" in the path is no replacement pattern (regression: "$&" pasted the matched key into it).
    const dir = dirWith({ "modelgate.toml": `[webhooks]\nenabled = true\nconfig = "a$&b/hooks.toml"\n` });
    mkdirSync(join(dir, "a$&b"));
    const file = join(dir, "a$&b", "hooks.toml");
    const cases: Array<[string, string]> = [
      [`[[endpoints]]\npath = "/x"\njob_id = "x"\n`, `${file}: endpoints[0].job_id: expected integer`],
      [`[[endpoints]]\npath = "/x"\n`, `${file}: endpoints[0].job_id`],
      [`[[endpoints]]\npath = "/x"\njob_id = 1\ncolour = "red"\n`, `${file}: endpoints[0].colour: unknown key`],
      [
        `[[endpoints]]\npath = "/x"\njob_id = 1\nauth = "bearer"\nsecret = "env:UNSET_HOOK_TOKEN"\n`,
        `${file}: endpoints[0].secret: environment variable UNSET_HOOK_TOKEN is not set`,
      ],
      [`max_body_bytes_in_flight = -1\n[[endpoints]]\npath = "/x"\njob_id = 1\n`, `${file}: max_body_bytes_in_flight`],
      // A message naming two keys, each followed by something else than a dot or bracket.
      [
        `max_body_bytes = 2000000\nmax_body_bytes_in_flight = 1000000\n[[endpoints]]\npath = "/x"\njob_id = 1\n`,
        `${file}: max_body_bytes_in_flight: must be at least ${file}: max_body_bytes,`,
      ],
      // The hint says how to write it in this file.
      [`[endpoints]\npath = "/x"\njob_id = 1\n`, `${file}: endpoints: expected a list (a list of tables is written [[endpoints]])`],
    ];
    for (const [text, message] of cases) {
      writeFileSync(file, text);
      expect(() => loadConfig(join(dir, "modelgate.toml"), {})).toThrow(message);
    }
    // A key of the main file keeps its own name.
    writeFileSync(file, `[[endpoints]]\npath = "/x"\njob_id = 1\n`);
    writeFileSync(join(dir, "modelgate.toml"), `[webhooks]\nenabled = true\nconfig = "a$&b/hooks.toml"\nlease_ms = "soon"\n`);
    expect(() => loadConfig(join(dir, "modelgate.toml"), {})).toThrow("webhooks.lease_ms: expected integer");
  });

  test("the same keys inline under [webhooks], with defaults filled", () => {
    const { config } = buildConfig(on([{ path: "/a", job_id: 1, auth: "bearer", secret: "literal" }]), { env: {} });
    expect(config.webhooks.endpoints[0].secret).toBe("literal");
    expect(config.webhooks.bind_address).toBe("0.0.0.0:9090");
    expect(config.webhooks.lease_ms).toBe(30_000);
    expect(config.webhooks.max_attempts).toBe(5);
  });

  test("secrets and the pull token are redacted by config check", () => {
    const loaded = buildConfig(on([{ path: "/a", job_id: 1, auth: "bearer", secret: "env:TOK" }], { pull_token: "pt-literal" }), { env: { TOK: "tok" } });
    const text = JSON.stringify(redactedConfig(loaded));
    expect(text).not.toContain("pt-literal");
    expect(text).not.toContain('"tok"');
    expect(text).toContain("<redacted>");
  });

  test("service_id in a crate file is ignored; in modelgate.toml it is an error", () => {
    const dir = dirWith({ "w.toml": `service_id = 5\n[[endpoints]]\npath = "/x"\njob_id = 1\n` });
    expect(buildConfig({ webhooks: { enabled: true, config: "w.toml" } }, { env: {}, baseDir: dir }).config.webhooks.endpoints).toHaveLength(1);
    expect(configError({ webhooks: { service_id: 3 } })).toStartWith("webhooks.service_id:");
  });
});

describe("validation errors name the path", () => {
  const cases: Array<[string, Record<string, unknown>, string]> = [
    ["no endpoints when enabled", { webhooks: { enabled: true } }, "webhooks.endpoints: at least one endpoint"],
    ["path without a leading slash", on([{ path: "hooks/x", job_id: 1 }]), 'webhooks.endpoints[0].path: must start with "/"'],
    [
      "duplicate path",
      on([
        { path: "/x", job_id: 1 },
        { path: "/x", job_id: 2 },
      ]),
      'webhooks.endpoints[1].path: duplicate path "/x"',
    ],
    ["reserved path", on([{ path: "/webhooks/health", job_id: 1 }]), 'webhooks.endpoints[0].path: "/webhooks/health" is reserved'],
    ["bearer without secret", on([{ path: "/x", job_id: 1, auth: "bearer" }]), 'webhooks.endpoints[0].secret: required for auth "bearer"'],
    ["hmac without secret", on([{ path: "/x", job_id: 1, auth: "hmac-sha256" }]), 'webhooks.endpoints[0].secret: required for auth "hmac-sha256"'],
    ["api-key without secret", on([{ path: "/x", job_id: 1, auth: "api-key", secret: "" }]), 'webhooks.endpoints[0].secret: required for auth "api-key"'],
    // Regression: unquoted digits were told the secret was missing.
    [
      "secret not a string",
      on([{ path: "/x", job_id: 1, auth: "bearer", secret: 12345678 }]),
      "webhooks.endpoints[0].secret: expected string, not a number (write it in quotes)",
    ],
    ["a path no request can carry as written", on([{ path: "/x y", job_id: 1 }]), 'webhooks.endpoints[0].path: "/x y" cannot arrive as written'],
    ["a path with a query", on([{ path: "/q?y=1", job_id: 1 }]), 'webhooks.endpoints[0].path: "/q?y=1" cannot arrive as written'],
    ["a non-ASCII path", on([{ path: "/café", job_id: 1 }]), 'webhooks.endpoints[0].path: "/café" cannot arrive as written'],
    [
      "a bearer secret ending in a newline",
      on([{ path: "/x", job_id: 1, auth: "bearer", secret: "tok123\n" }]),
      "webhooks.endpoints[0].secret: the bearer secret is sent in a header",
    ],
    [
      "a non-ASCII api-key secret",
      on([{ path: "/x", job_id: 1, auth: "api-key", secret: "pässwörd" }]),
      "webhooks.endpoints[0].secret: the api-key secret is sent in a header",
    ],
    [
      "an api_key_header that is not a header name",
      on([{ path: "/x", job_id: 1, auth: "api-key", secret: "k", api_key_header: "X Bad Key" }]),
      'webhooks.endpoints[0].api_key_header: "X Bad Key" is not a header name',
    ],
    [
      "a dedupe_header that is not a header name",
      on([{ path: "/x", job_id: 1, dedupe_header: "X Bad" }]),
      'webhooks.endpoints[0].dedupe_header: "X Bad" is not a header name',
    ],
    [
      "unknown auth mode",
      on([{ path: "/x", job_id: 1, auth: "oauth2", secret: "k" }]),
      'webhooks.endpoints[0].auth: must be one of "none", "bearer", "hmac-sha256", "api-key", "standard-webhooks" (got "oauth2")',
    ],
    ["missing job_id", on([{ path: "/x" }]), "webhooks.endpoints[0].job_id"],
    ["unknown endpoint key", on([{ path: "/x", job_id: 1, colour: "red" }]), "webhooks.endpoints[0].colour: unknown key"],
    // Sent as a header: refused here, not found out by every forward failing until the call is dead.
    [
      "a name that cannot be a header value",
      on([{ path: "/x", job_id: 1, name: "Alertmanager – prod" }]),
      "webhooks.endpoints[0].name: it is sent as the X-WEBHOOK-NAME header, so it must be printable ASCII",
    ],
    [
      "a name with a line break",
      on([{ path: "/x", job_id: 1, name: "a\r\nX-Injected: yes" }]),
      "webhooks.endpoints[0].name: it is sent as the X-WEBHOOK-NAME header",
    ],
    // Regression: a table (not a list) was reported as "at least one endpoint is required".
    ["endpoints written as a table", { webhooks: { enabled: true, endpoints: { path: "/x", job_id: 1 } } }, "webhooks.endpoints: expected a list"],
    [
      "job handler with two actions",
      { jobs: [{ job_id: 1, command: ["true"], forward: "http://127.0.0.1:1/" }] },
      'jobs[0]: set exactly one of "command", "forward" or "triage"',
    ],
    ["job handler with no action", { jobs: [{ job_id: 1 }] }, "jobs[0]: set exactly one"],
    [
      "two handlers for one job",
      {
        jobs: [
          { job_id: 1, command: ["true"] },
          { job_id: 1, command: ["true"] },
        ],
      },
      "jobs[1].job_id: another [[jobs]] handler",
    ],
  ];
  for (const [name, raw, message] of cases) {
    test(name, () => {
      expect(configError(raw)).toContain(message);
    });
  }

  test("an unset env: secret is a start-up error naming the variable", () => {
    const message = configError(on([{ path: "/x", job_id: 1, auth: "bearer", secret: "env:NOT_SET_ANYWHERE" }]));
    expect(message).toBe("webhooks.endpoints[0].secret: environment variable NOT_SET_ANYWHERE is not set");
  });

  test("errors inside the crate file name the file", () => {
    const dir = dirWith({ "w.toml": `[[endpoints]]\npath = "x"\njob_id = 1\n`, "bad.toml": "endpoints = [", "extra.toml": "colour = 1\n" });
    const file = (name: string) => ({ webhooks: { enabled: true, config: name } });
    const load = (name: string) => {
      try {
        buildConfig(file(name), { env: {}, baseDir: dir });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        return (err as Error).message;
      }
      return "no error";
    };
    expect(load("w.toml")).toContain(`${join(dir, "w.toml")}: endpoints[0].path: must start with "/"`);
    expect(load("bad.toml")).toContain("invalid TOML");
    expect(load("extra.toml")).toContain("colour: unknown key");
    expect(load("missing.toml")).toMatch(/^webhooks.config: .*missing.toml: cannot read \(ENOENT\)$/);
  });

  test("every [webhooks] tuning key may be set in the file, max_pending_bytes too (regression: it was an unknown key there)", () => {
    const dir = dirWith({ "w.toml": `max_pending_bytes = 1048576\n[[endpoints]]\npath = "/x"\njob_id = 1\n` });
    expect(buildConfig({ webhooks: { enabled: true, config: "w.toml" } }, { env: {}, baseDir: dir }).config.webhooks.max_pending_bytes).toBe(1_048_576);
  });

  test("webhooks.config from an unset variable is named with every other unset one (regression: alone, first)", () => {
    expect(() => buildConfig({ metrics: { token: "env:MG_MT" }, webhooks: { enabled: true, config: "env:WH_FILE" } }, { env: {} })).toThrow(
      "metrics.token: environment variable MG_MT is not set; also unset: webhooks.config (WH_FILE)",
    );
  });

  test("a key set both inline and in the file is refused", () => {
    const dir = dirWith({ "w.toml": CRATE_FILE });
    expect(() => buildConfig({ webhooks: { enabled: true, config: "w.toml", endpoints: [] } }, { env: { PRICE_ALERT_TOKEN: "t" }, baseDir: dir })).toThrow(
      "webhooks.endpoints: set both inline and in",
    );
  });
});

describe("retention", () => {
  test("done calls are kept retain_done_hours, and never less than the dedupe window (regression: a redelivery made a second call)", () => {
    expect(doneRetentionMs({ retain_done_hours: 168, dedupe_window_s: 86_400, endpoints: [] })).toBe(168 * 3_600_000);
    expect(doneRetentionMs({ retain_done_hours: 1, dedupe_window_s: 604_800, endpoints: [] })).toBe(604_800_000);
  });
});

describe("jobs nothing consumes", () => {
  const endpoints = [
    { path: "/hooks/alerts", job_id: 1 },
    { path: "/hooks/legacy", job_id: 3 },
    { path: "/hooks/legacy-2", job_id: 3 },
  ];
  test("an endpoint's job without a [[jobs]] handler is named with its paths, unless the pull API is on (regression: its calls waited in silence)", () => {
    const config = (extra: Record<string, unknown>) =>
      buildConfig({ webhooks: { enabled: true, endpoints, ...extra }, jobs: [{ job_id: 1, command: ["true"] }] }, { env: {} }).config;
    expect(unconsumedJobs(config({}))).toEqual([{ id: 3, paths: ["/hooks/legacy", "/hooks/legacy-2"] }]);
    expect(unconsumedJobs(config({ pull_token: "runner-token-1" }))).toEqual([]);
  });
});
