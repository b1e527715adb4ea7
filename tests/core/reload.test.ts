/**
 * Reading the config again without a restart, against the compiled binary: SIGHUP and
 * `modelgate reload`. Requests under way finish on the config they began with, new ones see the
 * new one; a config that fails its checks is refused and the running one serves on; rate-limit
 * buckets outlive a reload; restart-only keys keep their running value.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { BINARY, createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { eventually } from "../support/eventually";
import { formatCredits } from "../../src/credits/amount";

let gw: RunningGateway | null = null;
let mock: MockUpstream | null = null;

afterEach(async () => {
  if (gw && gw.proc.exitCode === null) await gw.stop();
  mock?.stop();
  gw = null;
  mock = null;
});

function models(upstream: string, entries: Array<{ id: string; prompt?: number; completion?: number }>): string {
  return entries
    .map(
      (m) =>
        `[[models]]\nid = "${m.id}"\ntargets = [{ upstream = "mock", model = "mock-small" }]\nprice = { prompt = ${m.prompt ?? 0}, completion = ${m.completion ?? 0} }\n`,
    )
    .join("\n")
    .concat(`\n[[upstreams]]\nname = "mock"\nbase_url = "${upstream}"\n`);
}

/** Writes the gateway's config file anew: its [server] table (listen, data_dir) as at start, then `rest`. */
function rewrite(gateway: RunningGateway, rest: string, server = ""): void {
  writeFileSync(
    join(gateway.dir, "modelgate.toml"),
    `[server]\nlisten = "127.0.0.1:${gateway.port}"\ndata_dir = "${join(gateway.dir, "data")}"\n${server}\n${rest}`,
  );
}

async function status(gateway: RunningGateway): Promise<{ config_loaded_at: string; config_reloads: number; models: number }> {
  return (await fetch(`${gateway.url}/api/status`)).json() as Promise<{ config_loaded_at: string; config_reloads: number; models: number }>;
}

async function reloaded(gateway: RunningGateway, count: number): Promise<boolean> {
  return eventually(async () => (await status(gateway)).config_reloads === count, 10_000);
}

async function balance(gateway: RunningGateway, email: string): Promise<string> {
  return (await gateway.cli(["credits", "balance", "--user", email])).stdout.trim();
}

const USAGE = { prompt_tokens: 1000, completion_tokens: 1000, total_tokens: 2000 };

describe("SIGHUP", () => {
  test("a stream under way finishes on the old price; the next request is charged the new one", async () => {
    let release = (): void => {};
    mock = startMockUpstream({ usage: USAGE, stallAfterChunks: 2, stallUntil: new Promise<void>((resolve) => (release = resolve)) });
    gw = await startGateway(models(mock.url, [{ id: "m", prompt: 1, completion: 1 }]));
    const { email, key } = await createUserKey(gw, { credits: "100" });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = stream[Symbol.asyncIterator]();
    const first = await chunks.next(); // under way: the upstream holds the rest
    expect(first.done).toBe(false);
    let text = first.value.choices[0]?.delta?.content ?? "";
    const before = await status(gw);

    rewrite(gw, models(mock.url, [{ id: "m", prompt: 1000, completion: 1000 }]));
    gw.proc.kill("SIGHUP");
    expect(await reloaded(gw, 1)).toBe(true);
    expect((await status(gw)).config_loaded_at > before.config_loaded_at).toBe(true);
    release();
    for (let next = await chunks.next(); !next.done; next = await chunks.next()) text += next.value.choices[0]?.delta?.content ?? "";
    expect(text).toBe("Hello from the mock upstream.");
    // 1000 + 1000 tokens at 1 credit per 1M each: 0.002 credits.
    expect(await balance(gw, email)).toBe(`${email}: ${formatCredits(100_000_000 - 2_000)} credits`);

    const answer = await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] });
    expect(answer.choices[0].message.content).toBe("Hello from the mock upstream.");
    // ... and at 1000 per 1M each, 2 credits more.
    expect(await balance(gw, email)).toBe(`${email}: ${formatCredits(100_000_000 - 2_000 - 2_000_000)} credits`);
  }, 60_000);

  test("a config that fails its checks is refused: the log names the path, the old config serves on, /api/status is unchanged", async () => {
    mock = startMockUpstream();
    gw = await startGateway(models(mock.url, [{ id: "m" }]).replace('[[models]]\nid = "m"', '[[models]]\nid = "m"\nfree = true'));
    const before = await status(gw);
    rewrite(gw, `${models(mock.url, [{ id: "m" }])}\n[[models]]\nid = "other"\ntargets = [{ upstream = "olama" }]\n`);
    gw.proc.kill("SIGHUP");
    expect(await eventually(() => gw!.output().includes("reload refused"), 10_000)).toBe(true);
    const line = gw
      .output()
      .split("\n")
      .find((l) => l.includes("reload refused"))!;
    expect(line).toContain('models[1].targets[0].upstream: no upstream named \\"olama\\"');
    expect(await status(gw)).toEqual(before);
    const chat = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    });
    expect(chat.status).toBe(200); // still free, as first configured
  }, 60_000);
});

describe("modelgate reload", () => {
  test("with no server running it refuses, naming the data directory; a pid file left behind by a killed server too", async () => {
    const dir = mkdtempSync(join(tmpdir(), "modelgate-reload-"));
    writeFileSync(join(dir, "modelgate.toml"), `[server]\ndata_dir = "${join(dir, "data")}"\n`);
    const run = async (): Promise<{ code: number; stderr: string }> => {
      const child = Bun.spawn([BINARY, "reload", "--config", join(dir, "modelgate.toml")], { stdout: "pipe", stderr: "pipe" });
      const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
      return { code, stderr };
    };
    const none = await run();
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`no server is running over data_dir ${join(dir, "data")}`);

    const gone = Bun.spawn(["true"]);
    await gone.exited;
    Bun.spawnSync(["mkdir", "-p", join(dir, "data")]);
    writeFileSync(join(dir, "data", "modelgate.pid"), `${gone.pid}\n`);
    const stale = await run();
    expect(stale.code).toBe(1);
    expect(stale.stderr).toContain(`names process ${gone.pid}, which is not a running modelgate`);
  });

  test("routes added and removed; a bad file is printed and not sent; a restart-only key keeps its value, with a warning", async () => {
    mock = startMockUpstream();
    gw = await startGateway(models(mock.url, [{ id: "old" }]).replaceAll("price = {", "free = true\nprice = {"));
    const chat = (model: string) =>
      fetch(`${gw!.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
      });
    expect((await chat("old")).status).toBe(200);

    rewrite(gw, `${models(mock.url, [{ id: "new" }]).replaceAll("price = {", "free = true\nprice = {")}\n[log]\nlevel = "debug"\n`);
    const result = await gw.cli(["reload"]);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain("config read again from");
    expect(result.stdout).toContain("restart to apply log (changed in the file)");
    expect((await status(gw)).config_reloads).toBe(1); // the command waited for the server's answer
    expect((await chat("new")).status).toBe(200);
    const gone = await chat("old");
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { error: { code: string } }).error.code).toBe("model_not_found");
    const listed = ((await (await fetch(`${gw.url}/v1/models`)).json()) as { data: Array<{ id: string }> }).data.map((m) => m.id);
    expect(listed).toEqual(["new"]);
    expect(gw.output()).toContain("reload: restart to apply log (changed in the file)");

    rewrite(gw, `${models(mock.url, [{ id: "new" }])}\n[[models]]\nid = "x"\ntargets = []\n`);
    const refused = await gw.cli(["reload"]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("config error: models[1].targets: ");
    expect((await status(gw)).config_reloads).toBe(1); // nothing was sent
  }, 60_000);

  test("a file this shell cannot check (a variable only the server has) is checked by the server, whose refusal is printed", async () => {
    mock = startMockUpstream();
    gw = await startGateway(models(mock.url, [{ id: "m" }]), { env: { MG_RELOAD_UPSTREAM: "ftp://127.0.0.1:1/v1" } });
    rewrite(gw, models("env:MG_RELOAD_UPSTREAM", [{ id: "m" }]));
    // This shell: the config file, not the server's variable.
    const shell: Record<string, string | undefined> = { ...process.env, MODELGATE_CONFIG: join(gw.dir, "modelgate.toml") };
    delete shell.MG_RELOAD_UPSTREAM;
    const child = Bun.spawn([BINARY, "reload"], { cwd: gw.dir, env: shell, stdout: "pipe", stderr: "pipe" });
    const [stderr, code] = await Promise.all([new Response(child.stderr).text(), child.exited]);
    expect(code).toBe(1);
    expect(stderr).toContain("not checked here, the server will: upstreams[0].base_url: environment variable MG_RELOAD_UPSTREAM is not set");
    expect(stderr).toContain("reload refused, the config loaded at");
    expect(stderr).toContain("upstreams[0].base_url");
    expect((await status(gw)).config_reloads).toBe(0);
  }, 60_000);

  test("rate-limit buckets outlive a reload; a changed limit applies to the next request", async () => {
    mock = startMockUpstream({ usage: USAGE });
    const routes = models(mock.url, [{ id: "m" }]).replace("price = {", "free = true\nprice = {");
    gw = await startGateway(`${routes}\n[limits]\napi_key = { per_minute = 2 }\n`);
    const { key } = await createUserKey(gw);
    const chat = () =>
      fetch(`${gw!.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
      });
    expect((await chat()).status).toBe(200);
    expect((await chat()).status).toBe(200);
    expect((await chat()).status).toBe(429);

    // The limit unchanged (a model added): the bucket is still empty.
    rewrite(gw, `${routes}\n[[models]]\nid = "m2"\ntargets = [{ upstream = "mock" }]\n[limits]\napi_key = { per_minute = 2 }\n`);
    gw.proc.kill("SIGHUP");
    expect(await reloaded(gw, 1)).toBe(true);
    expect((await chat()).status).toBe(429);

    rewrite(gw, `${routes}\n[limits]\napi_key = { per_minute = 50 }\n`);
    gw.proc.kill("SIGHUP");
    expect(await reloaded(gw, 2)).toBe(true);
    // The bucket fills toward the new limit at its rate (50 a minute); it did not start full.
    expect(await eventually(async () => (await chat()).status === 200, 10_000, 200)).toBe(true);
    const limited = await chat();
    expect(limited.headers.get("x-ratelimit-limit-requests")).toBe("50");
    expect(Number(limited.headers.get("x-ratelimit-remaining-requests"))).toBeLessThan(45);
  }, 60_000);
});
