import { describe, expect, test } from "bun:test";
import { buildConfig, ConfigError, findConfigFile, loadConfig, parseTomlText } from "../../src/config/load";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { secretRedactor } from "../../src/webhooks/redact";
import { redactedConfig } from "../../src/config/redact";

function build(toml: string, env: Record<string, string> = {}) {
  return buildConfig(parseTomlText(toml, "modelgate.toml"), { env });
}

function errorOf(toml: string, env: Record<string, string> = {}): string {
  try {
    build(toml, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("config", () => {
  test("an empty file gives the documented defaults", () => {
    const { config } = build("");
    expect(config.server.listen).toBe("0.0.0.0:8080");
    expect(config.server.data_dir).toBe("./data");
    expect(config.server.max_body_bytes).toBe(10_485_760);
    expect(config.limits.api_key.per_minute).toBe(60);
    expect(config.limits.session.per_minute).toBe(30);
    expect(config.limits.spend_auth.per_minute).toBe(120);
    expect(config.limits.anonymous).toEqual({ per_minute: 10, per_day: 5 });
    expect(config.auth.signup).toBe("closed");
    expect(config.webhooks.enabled).toBe(false);
  });

  test("upstreams and models fill their defaults", () => {
    const { config } = build(`
[[upstreams]]
name = "ollama"
base_url = "http://127.0.0.1:11434/v1"
[[models]]
id = "llama"
targets = [{ upstream = "ollama" }]
`);
    expect(config.upstreams[0].discover).toBe(false);
    expect(config.models[0]).toMatchObject({ free: false, strategy: "failover", price: { prompt: 0, completion: 0 } });
    expect(config.models[0].targets[0].weight).toBe(1);
  });

  test("an unknown upstream reference names the key path", () => {
    const message = errorOf(`
[[upstreams]]
name = "ollama"
base_url = "http://127.0.0.1:11434/v1"
[[models]]
id = "a"
targets = [{ upstream = "ollama" }]
[[models]]
id = "b"
targets = [{ upstream = "ollama" }, { upstream = "olama" }]
`);
    expect(message).toBe('models[1].targets[1].upstream: no upstream named "olama"');
  });

  test("a wrong type names the key path and the reason", () => {
    expect(errorOf(`[server]\nmax_body_bytes = "big"`)).toStartWith("server.max_body_bytes: expected integer");
  });

  test("a price above a credit a token, or not a finite number, is refused (costs must stay exact integers)", () => {
    const model = (price: string) =>
      `[[upstreams]]\nname = "u"\nbase_url = "http://127.0.0.1:1/v1"\n[[models]]\nid = "m"\ntargets = [{ upstream = "u" }]\nprice = ${price}\n`;
    expect(build(model("{ prompt = 1000000, completion = 0.15 }")).config.models[0].price).toEqual({ prompt: 1_000_000, completion: 0.15, request: 0 });
    expect(errorOf(model("{ completion = 1e300 }"))).toBe("models[0].price.completion: must be at most 1000000");
    expect(errorOf(model("{ prompt = inf }"))).toStartWith("models[0].price.prompt: expected number");
    expect(errorOf(model("{ prompt = nan }"))).toStartWith("models[0].price.prompt: expected number");
  });

  test("a list written as a table, or as a single value, is refused instead of dropped", () => {
    expect(errorOf(`[upstreams]\nname = "a"\nbase_url = "http://127.0.0.1:1/v1"`)).toBe(
      "upstreams: expected a list (a list of tables is written [[upstreams]])",
    );
    expect(errorOf(`[[upstreams]]\nname = "u"\nbase_url = "http://127.0.0.1:1/v1"\n[models]\nid = "m"\ntargets = [{ upstream = "u" }]`)).toBe(
      "models: expected a list (a list of tables is written [[models]])",
    );
    expect(errorOf(`[server]\ntrusted_proxies = { a = "10.0.0.1" }`)).toBe("server.trusted_proxies: expected a list");
    expect(errorOf(`[server]\ntrusted_proxies = "10.0.0.1"`)).toBe("server.trusted_proxies: expected a list");
  });

  test("an empty data_dir or metrics token is refused by name", () => {
    expect(errorOf(`[server]\ndata_dir = ""`)).toBe("server.data_dir: must not be empty");
    expect(errorOf(`[metrics]\ntoken = ""`)).toBe("metrics.token: must not be empty");
  });

  test("max_body_bytes_in_flight below max_body_bytes is refused by name", () => {
    expect(errorOf(`[server]\nmax_body_bytes = 5000\nmax_body_bytes_in_flight = 4000`)).toStartWith(
      "server.max_body_bytes_in_flight: must be at least server.max_body_bytes",
    );
  });

  test("a port above 65535 names the key", () => {
    expect(errorOf(`[server]\nlisten = "127.0.0.1:99999"`)).toBe("server.listen: port 99999 is out of range (0 to 65535)");
    expect(errorOf(`[webhooks]\nbind_address = "127.0.0.1:65536"`)).toBe("webhooks.bind_address: port 65536 is out of range (0 to 65535)");
    expect(build(`[server]\nlisten = "[::1]:65535"`).config.server.listen).toBe("[::1]:65535");
  });

  test("a listen address that is not host:port names listen, not the public_url built from it (regression: the error named server.public_url)", () => {
    for (const listen of ["http://127.0.0.1:8080", "999.1.1.1:8080", "[::1:8080", "my host:8080", "10.0.0.1/24:80"]) {
      expect(errorOf(`[server]\nlisten = "${listen}"`)).toStartWith(`server.listen: "${listen}" is not host:port`);
    }
    expect(errorOf(`[webhooks]\nbind_address = "tcp://0.0.0.0:9090"`)).toStartWith("webhooks.bind_address: ");
    for (const listen of ["127.0.0.1:8080", "[::]:8080", ":8080", "gateway.lan:8080", "localhost:1", "::1:8080", "model_gate:8080", "gw.lan.:8080"]) {
      expect(build(`[server]\nlisten = "${listen}"`).config.server.listen).toBe(listen);
    }
  });

  test("a string of the wrong form says the form in words, and a mistyped value is described, not echoed", () => {
    expect(errorOf(`[spend_auth]\noperator = "0x12"`)).toBe("spend_auth.operator: expected an address: 0x and 40 hex digits");
    expect(errorOf(`[[upstreams]]\nname = "u"\nbase_url = "127.0.0.1:11434/v1"`)).toBe("upstreams[0].base_url: expected an http:// or https:// URL");
    expect(errorOf(`[cluster]\nredis_url = "tcp://r:6379"`)).toBe("cluster.redis_url: expected a redis://, rediss://, valkey:// or valkeys:// URL");
    expect(errorOf(`[spend_auth]\nunits_per_credit = "1e6"`)).toBe("spend_auth.units_per_credit: expected a whole number written in quotes (digits only)");
    expect(errorOf(`[metrics]\ntoken = 123456789`)).toBe("metrics.token: expected string, not a number (write it in quotes)");
    expect(errorOf(`[server]\nmax_body_bytes = 1.5`)).toBe("server.max_body_bytes: expected integer, not a fraction");
    expect(errorOf(`[log]\nrequests = "yes"`)).toBe("log.requests: expected boolean, not a string");
    expect(errorOf(`[[upstreams]]\nbase_url = "http://u/v1"`)).toBe("upstreams[0].name: required");
  });

  test("an unknown key is refused by name", () => {
    expect(errorOf(`[server]\nlisten_on = "0.0.0.0:1"`)).toBe("server.listen_on: unknown key");
  });

  test("a key named __proto__ is refused like any unknown key (regression: silently ignored)", () => {
    expect(errorOf(`[server]\n__proto__ = 5`)).toBe("server.__proto__: unknown key");
    expect(errorOf(`[server.__proto__]\nlisten = "127.0.0.1:9999"`)).toBe("server.__proto__: unknown key");
    expect(errorOf(`[__proto__]\nlisten = "127.0.0.1:9999"`)).toBe("__proto__: unknown key");
  });

  test("an enum names its allowed values", () => {
    expect(errorOf(`[auth]\nsignup = "sometimes"`)).toBe('auth.signup: must be one of "closed", "open", "domain" (got "sometimes")');
  });

  test("duplicate model ids and aliases are refused", () => {
    const message = errorOf(`
[[upstreams]]
name = "u"
base_url = "http://x/v1"
[[models]]
id = "a"
targets = [{ upstream = "u" }]
[[models]]
id = "b"
aliases = ["a"]
targets = [{ upstream = "u" }]
`);
    expect(message).toBe('models[1]: model id or alias "a" is used twice');
  });

  test("a free model with a price is refused (regression: the price was listed, logged and counted as spent, never charged)", () => {
    const raw = {
      upstreams: [{ name: "u", base_url: "http://x/v1" }],
      models: [{ id: "a", free: true, price: { completion: 5 }, targets: [{ upstream: "u" }] }],
    };
    expect(() => buildConfig(raw, { env: {} })).toThrow("models[0].price.completion: a free model is never charged: remove the price, or remove free = true");
  });

  test("invalid TOML is a ConfigError naming the file, line and column (regression: a key set twice named neither)", () => {
    expect(() => parseTomlText("[server\nlisten = 1", "x.toml")).toThrow(/^x\.toml:1:\d+: invalid TOML/);
    expect(() => parseTomlText('[[upstreams]]\nname = "x"\nname = "y"\n', "dup.toml")).toThrow(/^dup\.toml:3:1: invalid TOML: trying to redefine/);
  });

  test("config check hides a URL's password and query values, and the path of an RPC or forward URL (regression: they were printed whole)", () => {
    const loaded = buildConfig(
      {
        upstreams: [
          { name: "a", base_url: "http://user:BASICPASS@10.0.0.5:8000/v1" },
          { name: "b", base_url: "https://x.example/v1?key=QUERYKEY" },
          { name: "c", base_url: "http://127.0.0.1:11434/v1" },
        ],
        spend_auth: {
          chain_id: 1,
          verifying_contract: `0x${"0".repeat(39)}1`,
          operator: `0x${"0".repeat(39)}2`,
          rpc_url: "https://mainnet.infura.io/v3/PROJECTKEY",
        },
        jobs: [{ job_id: 1, forward: "https://hooks.slack.com/services/T0/B0/HOOKKEY" }],
      },
      { env: {} },
    );
    const shown = redactedConfig(loaded) as { upstreams: Array<{ base_url: string }>; spend_auth: { rpc_url: string }; jobs: Array<{ forward: string }> };
    expect(shown.upstreams.map((u) => u.base_url)).toEqual([
      "http://<redacted>:<redacted>@10.0.0.5:8000/v1",
      "https://x.example/v1?<redacted>",
      "http://127.0.0.1:11434/v1",
    ]);
    expect(shown.spend_auth.rpc_url).toBe("https://mainnet.infura.io/<redacted>");
    expect(shown.jobs[0].forward).toBe("https://hooks.slack.com/<redacted>");
    // A URL with a stray percent sign is shown too, not an error (regression: "URI error").
    const odd = buildConfig({ upstreams: [{ name: "a", base_url: "http://example.com/v1%E0?key=abc" }] }, { env: {} });
    expect((redactedConfig(odd) as typeof shown).upstreams[0].base_url).toBe("http://example.com/v1%E0?<redacted>");
    // A token as the user, a query without "=", a fragment.
    const more = buildConfig(
      {
        upstreams: [
          { name: "a", base_url: "https://TOKEN1@h.example/v1" },
          { name: "b", base_url: "https://h.example/v1?TOKEN2" },
          { name: "c", base_url: "https://h.example/v1#TOKEN3" },
        ],
      },
      { env: {} },
    );
    expect(JSON.stringify(redactedConfig(more))).not.toMatch(/TOKEN\d/);
    // A URL the gateway could never call is refused by its key, without echoing it.
    for (const [raw, key] of [
      [{ upstreams: [{ name: "a", base_url: "http://user:SECRETPASS@127.0.0.1:99999/v1" }] }, "upstreams[0].base_url"],
      [{ jobs: [{ job_id: 1, forward: "https://hooks.example:123456/services/SECRETPATH" }] }, "jobs[0].forward"],
      // Regression: a bad OAuth endpoint passed `config check` and failed only at sign-in.
      [{ auth: { github: { client_id: "x", client_secret: "y", api_url: "not a url" } } }, "auth.github.api_url"],
      [{ auth: { google: { client_id: "x", client_secret: "y", token_url: "ftp://tokens.example/" } } }, "auth.google.token_url"],
    ] as const) {
      const message = (() => {
        try {
          buildConfig(raw as Record<string, unknown>, { env: {} });
          return "no error";
        } catch (err) {
          return (err as Error).message;
        }
      })();
      expect(message).toBe(`${key}: not a valid http(s) URL`);
    }
    // What runs is the URL as written.
    expect(loaded.config.spend_auth.rpc_url).toBe("https://mainnet.infura.io/v3/PROJECTKEY");
  });

  test("an empty --config is an error, not a quiet fall-back to another file or the defaults", () => {
    expect(() => findConfigFile("", { MODELGATE_CONFIG: "elsewhere.toml" })).toThrow("--config: the path is empty");
    expect(findConfigFile(undefined, { MODELGATE_CONFIG: "elsewhere.toml" })).toBe("elsewhere.toml");
  });

  test("without public_url, links are built from listen (regression: a changed listen still printed a setup link to localhost:8080)", () => {
    const publicUrl = (server: Record<string, unknown>) => buildConfig({ server }, { env: {} }).config.server.public_url;
    expect(publicUrl({})).toBe("http://localhost:8080");
    expect(publicUrl({ listen: "127.0.0.1:19301" })).toBe("http://127.0.0.1:19301");
    expect(publicUrl({ listen: ":9000" })).toBe("http://localhost:9000");
    expect(publicUrl({ listen: "[::]:9001" })).toBe("http://localhost:9001");
    expect(publicUrl({ listen: "[::1]:8081" })).toBe("http://[::1]:8081");
    expect(publicUrl({ listen: "127.0.0.1:0" })).toBe("http://localhost:8080");
    expect(publicUrl({ listen: "127.0.0.1:19301", public_url: "https://gw.example.com" })).toBe("https://gw.example.com");
  });

  test("public_url must be a URL of an origin, and listen may be :PORT for every interface", () => {
    for (const url of [
      "http://host with space",
      "http://",
      "https://gw.example.com/path",
      "https://gw.example.com?x=1",
      "https://gw.example.com/#f",
      "https://u:p@gw.example.com",
    ]) {
      expect(() => buildConfig({ server: { public_url: url } }, { env: {} })).toThrow("server.public_url:");
    }
    expect(buildConfig({ server: { public_url: "https://gw.example.com/" } }, { env: {} }).config.server.public_url).toBe("https://gw.example.com/");
    expect(buildConfig({ server: { listen: ":8080" } }, { env: {} }).config.server.listen).toBe(":8080");
  });

  test("env: secrets resolve, are redacted, and an unset variable is named", () => {
    const toml = `
[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key = "env:OPENAI_KEY"
`;
    const loaded = build(toml, { OPENAI_KEY: "sk-real-secret" });
    expect(loaded.config.upstreams[0].api_key).toBe("sk-real-secret");
    const printed = JSON.stringify(redactedConfig(loaded));
    expect(printed).not.toContain("sk-real-secret");
    expect(printed).toContain("<redacted>");
    expect(errorOf(toml)).toBe("upstreams[0].api_key: environment variable OPENAI_KEY is not set");
    expect(errorOf(toml, { OPENAI_KEY: "" })).toBe("upstreams[0].api_key: environment variable OPENAI_KEY is set but empty");
    // Regression: "env:" alone read "environment variable  is not set".
    for (const written of ["env:", "env:two words", "env:1ST"]) {
      expect(errorOf(toml.replace("env:OPENAI_KEY", written))).toBe(
        'upstreams[0].api_key: "env:" must be followed by an environment variable\'s name (letters, digits, _)',
      );
    }
  });

  test("a bearer token with a space or line break is refused (regression: a trailing newline from the environment made /metrics refuse everyone)", () => {
    for (const [table, key] of [
      ["metrics", "token"],
      ["webhooks", "pull_token"],
    ]) {
      const toml = `[${table}]\n${key} = "env:TOKEN"\n`;
      expect(build(toml, { TOKEN: "tok-0123456789" }).config).toBeDefined();
      expect(errorOf(toml, { TOKEN: "tok-0123456789\n" })).toBe(
        `${table}.${key}: a bearer token must be printable ASCII without spaces or line breaks (a trailing newline in the environment variable?)`,
      );
    }
  });

  test("a table written as a list, and a whole number too large to be exact, are named (regression: `server = []` passed as all defaults; `retry_after_s = 1e300` went out as `retry-after: 1e+300`)", () => {
    expect(errorOf("server = []")).toBe("server: expected a table, not a list");
    expect(errorOf("[[limits]]\nanonymous = { per_minute = 1 }")).toBe("limits: expected a table, not a list");
    expect(errorOf("[limits]\nanonymous = []")).toBe("limits.anonymous: expected a table, not a list");
    expect(errorOf(`[[upstreams]]\nname = "u"\nbase_url = "http://u/v1"\n\n[[models]]\nid = "m"\ntargets = [{ upstream = "u" }]\nprice = [1, 2]`)).toBe(
      "models[0].price: expected a table, not a list",
    );
    expect(errorOf("[server]\nrequest_log_days = 1e300")).toBe(
      "server.request_log_days: 1e+300 is too far from 0 to be a whole number exactly (at most 9007199254740991 either way)",
    );
    expect(errorOf("[webhooks]\nretry_after_s = 1e300")).toBe(
      "webhooks.retry_after_s: 1e+300 is too far from 0 to be a whole number exactly (at most 9007199254740991 either way)",
    );
    expect(build("[server]\nrequest_log_days = 1e3").config.server.request_log_days).toBe(1000);
    // A TOML date is an object, not a table (review finding: a price of a date was a price of nothing).
    expect(
      errorOf(`[[upstreams]]\nname = "u"\nbase_url = "http://u/v1"\n\n[[models]]\nid = "m"\ntargets = [{ upstream = "u" }]\nprice = 1979-05-27T07:32:00Z`),
    ).toBe("models[0].price: expected a table, not a date or time");
    expect(errorOf("[limits]\napi_key = 07:32:00")).toBe("limits.api_key: expected a table, not a date or time");
    expect(errorOf("[server]\nrequest_log_days = -1e300")).toBe(
      "server.request_log_days: -1e+300 is too far from 0 to be a whole number exactly (at most 9007199254740991 either way)",
    );
  });

  test("a config file that is not UTF-8, or far too large to be one, is refused naming the file (regression: Latin-1 `café` became a model id no client can send; /dev/zero was read without end)", () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-config-"));
    const latin1 = join(dir, "latin1.toml");
    writeFileSync(
      latin1,
      Buffer.concat([
        Buffer.from('[[upstreams]]\nname = "u"\nbase_url = "http://u/v1"\n\n[[models]]\nid = "caf'),
        Buffer.from([0xe9]),
        Buffer.from('"\ntargets = [{ upstream = "u" }]\n'),
      ]),
    );
    const refusal = (file: string): string => {
      try {
        loadConfig(file, {});
        return "no error";
      } catch (err) {
        return (err as Error).message;
      }
    };
    expect(refusal(latin1)).toBe(`${latin1}: not UTF-8 text (TOML files are UTF-8; convert it, e.g. with iconv -f latin1 -t utf-8)`);
    expect(refusal("/dev/zero")).toBe("/dev/zero: larger than 16 MiB; is it the config file?");
    const utf8 = join(dir, "utf8.toml");
    writeFileSync(utf8, '[[upstreams]]\nname = "u"\nbase_url = "http://u/v1"\n\n[[models]]\nid = "caf\u00e9"\ntargets = [{ upstream = "u" }]\n');
    expect(loadConfig(utf8, {}).config.models[0].id).toBe("caf\u00e9");
  });

  test("config check does not show a public_url that follows a listen port of 0 as localhost:8080 (regression: neither its host nor its port)", () => {
    const shown = (toml: string) => (redactedConfig(build(toml)) as { server: { public_url: string | null } }).server.public_url;
    expect(shown('[server]\nlisten = "127.0.0.1:0"')).toBeNull();
    expect(shown('[server]\nlisten = "127.0.0.1:0"\npublic_url = "https://gw.example.com"')).toBe("https://gw.example.com");
    expect(shown('[server]\nlisten = "127.0.0.1:9000"')).toBe("http://127.0.0.1:9000");
  });

  test("spend_auth.units_per_credit of 0 is refused (regression: it made every priced model free to SpendAuth callers)", () => {
    for (const zero of ["0", "000"])
      expect(errorOf(`[spend_auth]\nunits_per_credit = "${zero}"`)).toBe(
        "spend_auth.units_per_credit: must be at least 1 (0 would make every priced model free)",
      );
    expect(build('[spend_auth]\nunits_per_credit = "1"').config.spend_auth.units_per_credit).toBe("1");
  });

  test("an IPv6 zone in listen asks for public_url by name (regression: the error blamed a public_url never written)", () => {
    expect(errorOf('[server]\nlisten = "[fe80::1%lo]:9000"')).toBe(
      'server.public_url: required when server.listen names an IPv6 zone ("[fe80::1%lo]:9000"): a URL cannot carry one',
    );
    expect(build('[server]\nlisten = "[fe80::1%lo]:9000"\npublic_url = "http://gw.lan:9000"').config.server.public_url).toBe("http://gw.lan:9000");
  });

  test("listen and bind_address are refused in one plain message, and both may be :port (regression: a raw regex for some, and bind_address refused :9091)", () => {
    const plain = (path: string, value: string) =>
      `${path}: "${value}" is not host:port (an IP address, an IPv6 address in brackets or a host name, then a port; no scheme or path), such as 0.0.0.0:8080, [::1]:8080 or :8080`;
    for (const bad of ["8080", "localhost", ""]) expect(errorOf(`[server]\nlisten = "${bad}"`)).toBe(plain("server.listen", bad));
    expect(errorOf('[webhooks]\nbind_address = "9091"')).toBe(plain("webhooks.bind_address", "9091"));
    expect(build('[webhooks]\nbind_address = ":9091"').config.webhooks.bind_address).toBe(":9091");
    // The webhook gateway on the API's port: config check refuses what serve would fail to start.
    const both = (listen: string, bind: string) =>
      `[server]\nlisten = "${listen}"\n\n[webhooks]\nenabled = true\nbind_address = "${bind}"\n\n[[webhooks.endpoints]]\npath = "/a"\njob_id = 1`;
    for (const [listen, bind] of [
      ["127.0.0.1:9000", "127.0.0.1:9000"],
      [":9000", "127.0.0.1:9000"],
      ["127.0.0.1:9000", "0.0.0.0:9000"],
    ]) {
      expect(errorOf(both(listen, bind))).toBe(
        `webhooks.bind_address: "${bind}" is where server.listen ("${listen}") is: give the webhook gateway a port of its own`,
      );
    }
    // Other addresses, or the other family: both bind (review finding: 0.0.0.0 beside [::1] was refused).
    for (const [listen, bind] of [
      ["127.0.0.1:9000", "127.0.0.2:9000"],
      ["0.0.0.0:9000", "[::1]:9000"],
      ["[::1]:9000", ":9000"],
    ]) {
      expect(build(both(listen, bind)).config.webhooks.enabled).toBe(true);
    }
    expect(errorOf(both("[::]:9000", "127.0.0.1:9000"))).toContain("is where server.listen");
  });

  test("a domain sign-up that nobody could pass is refused (regression: no domains, or entries such as *.example.net, were accepted and matched nothing)", () => {
    expect(errorOf('[auth]\nsignup = "domain"')).toBe(
      'auth.allowed_domains: signup = "domain" needs at least one domain (or signup = "closed" to let no one sign up)',
    );
    for (const entry of ["*.example.net", "https://x.com", "example", "x.com/path"]) {
      expect(errorOf(`[auth]\nsignup = "domain"\nallowed_domains = ["example.com", "${entry}"]`)).toBe(
        `auth.allowed_domains[1]: "${entry}" is not a domain such as example.com (no wildcard, scheme or path; a subdomain is listed on its own)`,
      );
    }
    const fine = ["example.com", "@example.org", "\uff45xample.net", "b\u00fccher.de", "xn--bcher-kva.de", "sub.example.co.uk"];
    expect(build(`[auth]\nsignup = "domain"\nallowed_domains = ${JSON.stringify(fine)}`).config.auth.allowed_domains).toEqual(fine);
  });

  test("a literal secret under a secret key name is redacted too", () => {
    const loaded = build(`[[upstreams]]\nname = "x"\nbase_url = "http://x/v1"\napi_key = "literal-key"`);
    expect(JSON.stringify(redactedConfig(loaded))).not.toContain("literal-key");
  });

  test("the secret values and the variables they came from are collected (for job failures and job environments)", () => {
    const loaded = build(
      `[[upstreams]]\nname = "x"\nbase_url = "http://x/v1"\napi_key = "literal-key"\n\n[[upstreams]]\nname = "y"\nbase_url = "http://y/v1"\napi_key = "abc"\n\n[[jobs]]\njob_id = 1\nforward = "env:HOOK_URL"`,
      { HOOK_URL: "https://hooks.example/T0/secret" },
    );
    // A forward URL's path is its key (a Slack webhook's): whole, not segment by segment (common words).
    expect([...loaded.secretValues].sort()).toEqual(["T0/secret", "https://hooks.example/T0/secret", "literal-key"]);
    expect([...loaded.secretEnv]).toEqual(["HOOK_URL"]);
  });

  test("what config check hides of a URL is a secret value too, as written and decoded (regression: a job's stderr quoting base_url's password or query key was stored and logged in clear)", () => {
    const loaded = build(
      `[[upstreams]]\nname = "x"\nbase_url = "http://bu:p%40ssword1@127.0.0.1:1/v1?api-key=QUERYSECRETVALUE&api-version=2024-06-01#FRAGMENTKEY"`,
    );
    const redact = secretRedactor(loaded.secretValues);
    expect(redact("pw=p%40ssword1 pw=p@ssword1 q=QUERYSECRETVALUE f=FRAGMENTKEY at 2024-06-01")).toBe(
      "pw=[redacted] pw=[redacted] q=[redacted] f=[redacted] at 2024-06-01",
    );
    // Not the user name, nor a forward URL's path segment by segment: common words would go (review finding).
    const words = build(
      `[[upstreams]]\nname = "x"\nbase_url = "http://ubuntu:pw-123456@127.0.0.1:1/v1"\n\n[[jobs]]\njob_id = 1\nforward = "http://127.0.0.1:9000/alerts/webhook"`,
    );
    expect(secretRedactor(words.secretValues)("ssh ubuntu@host: cannot post alerts to webhook pw-123456")).toBe(
      "ssh ubuntu@host: cannot post alerts to webhook [redacted]",
    );
    expect(JSON.stringify(redactedConfig(loaded))).not.toContain("QUERYSECRETVALUE");
  });
});
