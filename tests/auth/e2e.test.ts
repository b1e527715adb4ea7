/**
 * End to end against the compiled binary: first-run setup link, the CLI on the database of the
 * running server, the official `openai` SDK with a key the CLI created, metering, and a CLI
 * revocation taking effect on the running server at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { PAID_PRICE, jsonOf } from "./support";
import { formatCredits } from "../../src/credits/amount";

let upstream: MockUpstream;
let gw: RunningGateway;

const config = (url: string): string => `
[[upstreams]]
name = "mock"
base_url = "${url}"

[[models]]
id = "paid-model"
targets = [{ upstream = "mock", model = "mock-large" }]
price = { prompt = ${PAID_PRICE.prompt}, completion = ${PAID_PRICE.completion} }

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`;

async function cli(args: string[], stdin?: string): Promise<string> {
  const result = await gw.cli(args, stdin);
  if (result.code !== 0) throw new Error(`modelgate ${args.join(" ")} exited ${result.code}: ${result.stderr}`);
  return result.stdout;
}

beforeAll(async () => {
  upstream = startMockUpstream();
  gw = await startGateway(config(upstream.url));
});

afterAll(async () => {
  await gw.stop();
  upstream.stop();
});

describe("first start", () => {
  test("logs a one-time setup link; the form creates the administrator once", async () => {
    const match = /open (http:\/\/localhost:8080\/setup\?token=([a-z2-7]{32}))/.exec(gw.output());
    expect(match).not.toBeNull();
    const token = match![2];
    const page = await fetch(`${gw.url}/setup?token=${token}`);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<form method="post" action="/setup">');
    const post = (email: string) => fetch(`${gw.url}/setup`, {
      method: "POST",
      redirect: "manual",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: gw.url },
      body: new URLSearchParams({ token, email, password: "a long admin password" }),
    });
    const created = await post("admin@example.com");
    expect(created.status).toBe(303);
    const cookie = created.headers.getSetCookie()[0].split(";")[0];
    const me = await fetch(`${gw.url}/auth/me`, { headers: { cookie } });
    expect((await jsonOf(me)).user).toMatchObject({ email: "admin@example.com", is_admin: true });
    const replay = await post("intruder@example.com");
    expect(replay.status).toBe(400);
    expect((await fetch(`${gw.url}/setup?token=${token}`)).status).toBe(404);
    // The admin grants credits over HTTP (the dashboard's route).
    await cli(["user", "add", "sdk@example.com"]);
    const grant = await fetch(`${gw.url}/api/admin/credits`, {
      method: "POST",
      headers: { cookie, origin: gw.url, "content-type": "application/json" },
      body: JSON.stringify({ email: "sdk@example.com", amount: "0.5" }),
    });
    expect(await jsonOf(grant)).toEqual({ email: "sdk@example.com", granted: "0.500000", balance: "0.500000" });
  });
});

describe("the openai SDK with a key from the CLI", () => {
  test("completes (JSON and stream), is metered, and stops at once when the CLI revokes the key", async () => {
    await cli(["credits", "grant", "--user", "sdk@example.com", "--amount", "1.5"]);
    const key = (await cli(["key", "create", "--user", "sdk@example.com", "--name", "ci", "--expires", "30d"])).trim();
    expect(key).toMatch(/^sk-mg-[a-z2-7]{46}$/);
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });

    const { data: completion, response } = await client.chat.completions
      .create({ model: "paid-model", messages: [{ role: "user", content: "Hello" }] })
      .withResponse();
    expect(completion.choices[0].message.content).toBe("Hello from the mock upstream.");
    expect(response.headers.get("x-ratelimit-limit-requests")).toBe("60");
    expect(response.headers.get("x-ratelimit-remaining-requests")).toBe("59");

    const stream = await client.chat.completions.create({ model: "paid-model", messages: [{ role: "user", content: "Hello" }], stream: true });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
    expect(streamed).toBe("Hello from the mock upstream.");

    const listed = await cli(["key", "list", "--user", "sdk@example.com", "--json"]);
    const [info] = JSON.parse(listed);
    expect(info).toMatchObject({ name: "ci", email: "sdk@example.com", revokedAt: null });
    expect(listed).not.toContain(key);

    expect((await cli(["key", "revoke", info.id])).trim()).toBe(`revoked ${info.id}`);
    const refused = await client.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "again" }] }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    expect((refused as Error).message).toContain("revoked");

    const unknown = new OpenAI({ apiKey: "sk-mg-not-a-key", baseURL: `${gw.url}/v1`, maxRetries: 0 });
    expect(await unknown.models.list().then(() => "ok")).toBe("ok"); // /v1/models needs no key
    expect(await unknown.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e)).toBeInstanceOf(OpenAI.AuthenticationError);
  });

  test("after a graceful stop the ledger holds both debits; the CLI reads the balance", async () => {
    const prompt = JSON.stringify([{ role: "user", content: "Hello" }]).length >> 2;
    const cost = prompt * PAID_PRICE.prompt + 6 * PAID_PRICE.completion;
    expect(await gw.stop()).toBe(0); // SIGTERM flushes what is written behind
    const balance = await cli(["credits", "balance", "--user", "sdk@example.com"]);
    expect(balance.trim()).toBe(`sdk@example.com: ${formatCredits(2_000_000 - 2 * cost)} credits`);
    const keys = await cli(["key", "list"]);
    expect(keys).toMatch(/key_[a-z2-7]+ +sdk@example\.com +ci +sk-mg-[a-z2-7]{6}\.\.\. .* revoked /);
    gw = await startGateway("", { dir: gw.dir }); // restart on the same data: no setup link now
    expect(gw.output()).not.toContain("/setup?token=");
  });
});

describe("CLI errors", () => {
  test("clear messages and exit codes, nothing changed", async () => {
    const unknownUser = await gw.cli(["key", "create", "--user", "nobody@example.com"]);
    expect(unknownUser.code).toBe(2);
    expect(unknownUser.stderr).toContain("no user with the email nobody@example.com");
    const badAmount = await gw.cli(["credits", "grant", "--user", "sdk@example.com", "--amount", "1.2345678"]);
    expect(badAmount.code).toBe(2);
    expect(badAmount.stderr).toContain("at most 6 decimals");
    const badExpiry = await gw.cli(["key", "create", "--user", "sdk@example.com", "--expires", "soon"]);
    expect(badExpiry.code).toBe(2);
    const duplicate = await gw.cli(["user", "add", "sdk@example.com"]);
    expect(duplicate.code).toBe(2);
    expect(duplicate.stderr).toContain("already exists");
    const withPassword = await gw.cli(["user", "add", "pw@example.com", "--password-stdin"], "a fine password\n");
    expect(withPassword.code).toBe(0);
    const login = await fetch(`${gw.url}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ email: "pw@example.com", password: "a fine password" }),
    });
    expect(login.status).toBe(200);
  });
});
