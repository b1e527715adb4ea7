/**
 * The database commands in a shell without the server's environment, against the compiled binary:
 * the config's `env:` secrets are unset (they live in the server's unit file), and `user`, `key`,
 * `credits`, `jobs`, `settlements` and `migrate` still work, while `serve` and `config check`
 * stop naming every unset variable (regression: `key create` failed with
 * "auth.github.client_secret: environment variable ... is not set").
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BINARY } from "../support/binary";

const ADDRESS = `0x${"11".repeat(20)}`;

/** Every kind of secret the config may read from the environment, none of the variables set. */
const SECRETS = `
[auth.github]
client_id = "Iv1.abc"
client_secret = "env:MG_UNSET_GITHUB_CLIENT_SECRET"

[[upstreams]]
name = "openai"
base_url = "https://api.openai.com/v1"
api_key = "env:MG_UNSET_OPENAI_KEY"

[spend_auth]
rpc_url = "http://127.0.0.1:8545"
operator = "${ADDRESS}"
verifying_contract = "${ADDRESS}"
operator_key = "env:MG_UNSET_OPERATOR_KEY"

[metrics]
token = "env:MG_UNSET_METRICS_TOKEN"

[webhooks]
enabled = true
pull_token = "env:MG_UNSET_PULL_TOKEN"

[[webhooks.endpoints]]
path = "/hooks/alerts"
job_id = 1
auth = "hmac-sha256"
secret = "env:MG_UNSET_WEBHOOK_SECRET"
`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** A config file in a fresh directory: a [server] table with its data_dir, then `body`. */
function writeConfig(body: string, server = ""): string {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-secrets-"));
  const file = join(dir, "modelgate.toml");
  writeFileSync(file, `[server]\ndata_dir = "${join(dir, "data")}"\n${server}\n${body}`);
  return file;
}

/** Runs the binary with an environment that holds none of the MG_UNSET_ variables. */
async function run(config: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith("MG_UNSET_") && name !== "MODELGATE_CONFIG"));
  const child = Bun.spawn([BINARY, ...args, "--config", config], { env: { ...base, ...env }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stdout, stderr, code] = await Promise.all([new Response(child.stdout).text(), new Response(child.stderr).text(), child.exited]);
  return { code, stdout, stderr };
}

describe("env: secrets and the database commands", () => {
  test("user, key, credits, jobs, settlements and migrate work with every env: secret unset", async () => {
    const config = writeConfig(SECRETS);
    const ok = async (args: string[]): Promise<string> => {
      const result = await run(config, args);
      expect({ args, code: result.code, stderr: result.stderr.includes("not set") ? result.stderr : "" }).toEqual({ args, code: 0, stderr: "" });
      return result.stdout;
    };
    expect(await ok(["migrate"])).toContain("database is up to date");
    expect(await ok(["user", "add", "ops@example.com"])).toContain("created user");
    await ok(["user", "verify", "ops@example.com"]);
    expect((await ok(["key", "create", "--user", "ops@example.com", "--name", "ci"])).trim()).toStartWith("sk-mg-");
    const keys = JSON.parse(await ok(["key", "list", "--json"])) as Array<{ id: string }>;
    expect(keys).toHaveLength(1);
    expect(await ok(["key", "revoke", keys[0].id])).toContain("revoked");
    expect(await ok(["credits", "grant", "--user", "ops@example.com", "--amount", "12.50"])).toContain("balance 12.5");
    expect(await ok(["credits", "balance", "--user", "ops@example.com"])).toContain("12.5");
    expect(await ok(["jobs", "list"])).toContain("no webhook calls");
    await ok(["settlements", "list"]);
  });

  test("serve and config check still stop, naming the unset variable", async () => {
    const config = writeConfig(SECRETS, 'listen = "127.0.0.1:0"');
    // Every unset variable at once (regression: one per attempt, four attempts for four variables).
    const expected =
      "modelgate: config error: auth.github.client_secret: environment variable MG_UNSET_GITHUB_CLIENT_SECRET is not set; also unset: upstreams[0].api_key (MG_UNSET_OPENAI_KEY), " +
      "spend_auth.operator_key (MG_UNSET_OPERATOR_KEY), metrics.token (MG_UNSET_METRICS_TOKEN), webhooks.pull_token (MG_UNSET_PULL_TOKEN), webhooks.endpoints[0].secret (MG_UNSET_WEBHOOK_SECRET)\n";
    for (const args of [["serve"], ["config", "check"]]) {
      const result = await run(config, args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 1, stderr: expected });
    }
    // With every variable set, a secret that is set but malformed is refused (here: not a private key).
    const set = {
      MG_UNSET_GITHUB_CLIENT_SECRET: "gh-secret",
      MG_UNSET_OPENAI_KEY: "sk-upstream",
      MG_UNSET_OPERATOR_KEY: "not-a-key",
      MG_UNSET_METRICS_TOKEN: "metrics-token",
      MG_UNSET_PULL_TOKEN: "pull-token",
      MG_UNSET_WEBHOOK_SECRET: "hook-secret",
    };
    expect((await run(config, ["config", "check"], set)).stderr).toBe("modelgate: config error: spend_auth.operator_key: not a 32-byte hex private key\n");
  });

  test("a variable of a URL that carries a key may be unset too; data_dir must resolve", async () => {
    // base_url, rpc_url and a job's forward often hold keys, so they are written as env: as well.
    const urls = `
[[upstreams]]
name = "vllm"
base_url = "env:MG_UNSET_VLLM_URL"

[[jobs]]
job_id = 1
forward = "env:MG_UNSET_FORWARD_URL"
`;
    const config = writeConfig(`${SECRETS}${urls}`);
    for (const args of [
      ["user", "add", "b@example.com"],
      ["jobs", "list"],
      ["key", "list"],
    ]) {
      const result = await run(config, args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({ args, code: 0, stderr: "" });
    }
    // The data directory is what these commands use: read from an unset variable, it is named.
    const dir = mkdtempSync(join(tmpdir(), "modelgate-secrets-"));
    const file = join(dir, "modelgate.toml");
    writeFileSync(file, `[server]\ndata_dir = "env:MG_UNSET_DATA_DIR"\n${SECRETS}`);
    for (const args of [["user", "add", "a@example.com"], ["migrate"]]) {
      const result = await run(file, args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({
        args,
        code: 1,
        stderr: "modelgate: config error: server.data_dir: environment variable MG_UNSET_DATA_DIR is not set\n",
      });
    }
  });

  test("with every variable set, the database commands check the whole file as serve does", async () => {
    const set = {
      MG_UNSET_GITHUB_CLIENT_SECRET: "gh-secret",
      MG_UNSET_OPENAI_KEY: "sk-upstream",
      MG_UNSET_OPERATOR_KEY: `0x${"ab".repeat(32)}`,
      MG_UNSET_METRICS_TOKEN: "metrics-token",
      MG_UNSET_PULL_TOKEN: "pull-token",
      MG_UNSET_WEBHOOK_SECRET: "hook-secret-0123456789",
    };
    expect((await run(writeConfig(SECRETS), ["migrate"], set)).code).toBe(0);
    const badKey = await run(writeConfig(SECRETS), ["key", "list"], { ...set, MG_UNSET_OPERATOR_KEY: "not-a-key" });
    expect({ code: badKey.code, stderr: badKey.stderr }).toEqual({
      code: 1,
      stderr: "modelgate: config error: spend_auth.operator_key: not a 32-byte hex private key\n",
    });
    const typo = await run(writeConfig(`${SECRETS}\n[[models]]\nid = "m"\ntargets = [{ upstream = "olama" }]\n`), ["key", "list"], set);
    expect({ code: typo.code, stderr: typo.stderr }).toEqual({
      code: 1,
      stderr: 'modelgate: config error: models[0].targets[0].upstream: no upstream named "olama"\n',
    });
    // A file without env: at all is always checked.
    const plain = await run(writeConfig('[[models]]\nid = "m"\ntargets = [{ upstream = "olama" }]\n'), ["key", "list"]);
    expect(plain.code).toBe(1);
  });

  test('data_dir = ":memory:" is refused: it would keep nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-secrets-"));
    const file = join(dir, "modelgate.toml");
    writeFileSync(file, '[server]\ndata_dir = ":memory:"\n');
    for (const args of [
      ["user", "add", "a@example.com"],
      ["config", "check"],
    ]) {
      const result = await run(file, args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({
        args,
        code: 1,
        stderr: 'modelgate: config error: server.data_dir: ":memory:" would keep nothing (users, keys, credits); name a directory\n',
      });
    }
  });

  test("a data_dir with a control character is refused, not echoed raw in an error (regression: a NUL byte reached the terminal)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-secrets-"));
    const file = join(dir, "modelgate.toml");
    writeFileSync(file, `[server]\ndata_dir = "${dir}/a\\u0000b"\n`);
    for (const args of [
      ["user", "add", "a@example.com"],
      ["config", "check"],
    ]) {
      const result = await run(file, args);
      expect({ args, code: result.code, stderr: result.stderr }).toEqual({
        args,
        code: 1,
        stderr: "modelgate: config error: server.data_dir: contains a control character (a NUL byte, a line break); name a directory\n",
      });
    }
  });
});
