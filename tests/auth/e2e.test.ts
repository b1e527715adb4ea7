/**
 * End to end against the compiled binary: first-run setup link and its page (refusals shown on
 * the page, JSON callers answered in JSON), the CLI on the database of the running server, the
 * official `openai` SDK with a key the CLI created, metering, and a CLI revocation or grant taking
 * effect on the running server at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { eventually } from "../support/eventually";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { BROWSER_ACCEPT, PAID_PRICE, jsonOf, modelsToml } from "./support";
import { formatCredits } from "../../src/credits/amount";

let upstream: MockUpstream;
let gw: RunningGateway;

const config = modelsToml;

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
  test("logs a one-time setup link; the styled form shows refusals and creates the administrator once", async () => {
    // No public_url is configured: the link is built from listen, so it opens as printed.
    const match = /open (http:\/\/\S+\/setup\?token=([a-z2-7]{32}))/.exec(gw.output());
    expect(match).not.toBeNull();
    expect(match![1]).toStartWith(`${gw.url}/setup?token=`);
    const token = match![2];
    const page = await fetch(match![1]);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-security-policy")).toContain("default-src 'self'");
    const form = await page.text();
    expect(form).toContain('<form method="post" action="/setup">');
    expect(form).toContain('<link rel="stylesheet" href="/dashboard/assets/style.css');
    expect(form).toContain('<label for="email">Administrator email</label>');
    expect(form).not.toContain("<style>");
    const post = (fields: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(`${gw.url}/setup`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: BROWSER_ACCEPT, origin: gw.url, ...headers },
        body: new URLSearchParams(fields),
      });
    const admin = { token, email: "admin@example.com", password: "a long admin password" };

    // Refused form posts go back to the form with a message from the fixed table; nothing changes.
    const short = await post({ ...admin, password: "hunter2" });
    expect(short.status).toBe(303);
    expect(short.headers.get("location")).toBe(`/setup?token=${token}&error=password`);
    const shown = await fetch(`${gw.url}${short.headers.get("location")}`);
    expect(shown.status).toBe(200);
    const shownText = await shown.text();
    expect(shownText).toContain('role="alert">The password must be 8 to 256 characters.</p>');
    expect(shownText).not.toContain("hunter2");
    const crossSite = await post(admin, { origin: "https://evil.example" });
    expect(crossSite.headers.get("location")).toBe(`/setup?token=${token}&error=origin`);
    // JSON callers keep JSON answers.
    const json = await fetch(`${gw.url}/setup`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json", origin: gw.url },
      body: JSON.stringify({ ...admin, email: "not an email" }),
    });
    expect(json.status).toBe(400);
    expect((await jsonOf(json)).error).toMatchObject({ code: "invalid_request_error", param: "email" });

    // The link still works after every refusal.
    const created = await post(admin);
    expect(created.status).toBe(303);
    expect(created.headers.get("location")).toBe("/dashboard");
    const cookie = created.headers.getSetCookie()[0].split(";")[0];
    const me = await fetch(`${gw.url}/auth/me`, { headers: { cookie } });
    expect((await jsonOf(me)).user).toMatchObject({ email: "admin@example.com", is_admin: true });
    const replay = await post({ ...admin, email: "intruder@example.com" });
    expect(replay.status).toBe(303);
    expect(replay.headers.get("location")).toBe("/setup?error=setup_invalid");
    const used = await fetch(`${gw.url}/setup?token=${token}`);
    expect(used.status).toBe(404);
    expect(await used.text()).toContain("This setup link is invalid, expired or already used.");
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
    const { key, id } = await createUserKey(gw, { email: "sdk@example.com", name: "ci", expires: "30d", credits: "1.5" });
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
    expect(info).toMatchObject({ id, name: "ci", email: "sdk@example.com", revokedAt: null });
    expect(listed).not.toContain(key);

    expect((await cli(["key", "revoke", info.id])).trim()).toBe(`revoked ${info.id}`);
    // The CLI is another process: its change reaches the server's key cache within its 50 ms poll.
    let refused: unknown;
    const again = () => client.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "again" }] });
    await eventually(async () => (refused = await again().catch((e: unknown) => e)) instanceof OpenAI.AuthenticationError);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    expect((refused as Error).message).toContain("revoked");

    const unknown = new OpenAI({ apiKey: "sk-mg-not-a-key", baseURL: `${gw.url}/v1`, maxRetries: 0 });
    expect(await unknown.models.list().then(() => "ok")).toBe("ok"); // /v1/models needs no key
    expect(await unknown.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "x" }] }).catch((e: unknown) => e)).toBeInstanceOf(
      OpenAI.AuthenticationError,
    );
  });

  test("a CLI grant reaches the balance the running server keeps in memory within its poll", async () => {
    const { key } = await createUserKey(gw, { email: "late@example.com", name: "late" });
    const paid = () =>
      fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "paid-model", messages: [{ role: "user", content: "Hello" }] }),
      });
    expect((await paid()).status).toBe(402); // the server now keeps this user's balance, 0
    await cli(["credits", "grant", "--user", "late@example.com", "--amount", "1"]);
    expect(await eventually(async () => (await paid()).status === 200)).toBe(true);
  });

  test("after a graceful stop the ledger holds both requests' debits; the CLI reads the balance", async () => {
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
    // The database looked in is named (regression: run from another directory, a new empty one was searched in silence).
    expect(unknownUser.stderr).toContain(`no user with the email nobody@example.com in ${gw.where} (create one with`);
    const badAmount = await gw.cli(["credits", "grant", "--user", "sdk@example.com", "--amount", "1.2345678"]);
    expect(badAmount.code).toBe(2);
    expect(badAmount.stderr).toContain("at most 6 decimals");
    const badExpiry = await gw.cli(["key", "create", "--user", "sdk@example.com", "--expires", "soon"]);
    expect(badExpiry.code).toBe(2);
    const duplicate = await gw.cli(["user", "add", "sdk@example.com"]);
    expect(duplicate.code).toBe(2);
    expect(duplicate.stderr).toContain("already exists");
    // Bytes that are not UTF-8 are refused, not stored as U+FFFD (a password no browser could type).
    const latin1 = await gw.cli(
      ["user", "add", "latin@example.com", "--password-stdin"],
      new Uint8Array([...Buffer.from("pass"), 0xe9, ...Buffer.from("word1\n")]),
    );
    expect([latin1.code, latin1.stderr.trim()]).toEqual([2, "modelgate: the password on stdin is not UTF-8 text"]);
    expect((await gw.cli(["user", "add", "latin@example.com"])).code).toBe(0);
    const twoLines = await gw.cli(["user", "add", "lines@example.com", "--password-stdin"], "first line\nsecond line\n");
    expect([twoLines.code, twoLines.stderr.trim()]).toEqual([2, "modelgate: the password on stdin has a line break inside it (one at its end is dropped)"]);
    const withPassword = await gw.cli(["user", "add", "pw@example.com", "--password-stdin"], "a fine password\n");
    expect(withPassword.code).toBe(0);
    const login = await fetch(`${gw.url}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify({ email: "pw@example.com", password: "a fine password" }),
    });
    expect(login.status).toBe(200);
    const session = login.headers
      .getSetCookie()
      .find((c) => c.startsWith("mg_session="))!
      .split(";")[0];

    // A forgotten password: the CLI sets a new one; the old one and the session it opened stop working.
    const tooShort = await gw.cli(["user", "password", "pw@example.com"], "short\n");
    expect(tooShort.code).toBe(2);
    expect((await gw.cli(["user", "password", "nobody@example.com"], "another fine one\n")).code).toBe(2);
    const reset = await gw.cli(["user", "password", "pw@example.com"], "another fine one\n");
    expect({ code: reset.code, stdout: reset.stdout.trim() }).toEqual({
      code: 0,
      stdout: "set a new password for pw@example.com; their sessions ended, so they sign in again",
    });
    const signIn = (password: string) =>
      fetch(`${gw.url}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json" },
        body: JSON.stringify({ email: "pw@example.com", password }),
      });
    expect((await signIn("a fine password")).status).toBe(401);
    expect((await signIn("another fine one")).status).toBe(200);
    expect(
      (await fetch(`${gw.url}/api/admin/credits`, { method: "POST", headers: { cookie: session, "content-type": "application/json" }, body: "{}" })).status,
    ).toBe(401);
  });
});
