/**
 * Disabling and enabling users: disableUser/enableUser over the database (sessions end, keys are
 * refused from the next request, enabling restores the keys), and the same through the compiled
 * binary, where `modelgate user disable` from another process stops the running server from
 * accepting the user's key on the very next request.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { eventually } from "../support/eventually";
import { disableUser, enableUser, findUserById } from "../../src/auth/users";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { buildAuthApp, jsonOf, type AuthTestApp } from "./support";

const HI = { model: "free-model", messages: [{ role: "user", content: "hi" }] };

describe("disableUser / enableUser", () => {
  let t: AuthTestApp;
  afterEach(() => t?.close());

  test("disabling ends the sessions and refuses the keys at once; enabling restores the keys only", async () => {
    t = buildAuthApp();
    const ann = await t.user("ann@example.com");
    const bob = await t.user("bob@example.com");
    const key = await t.key(ann.id);
    const cookie = `mg_session=${await t.session(ann.id)}`;
    const bobCookie = `mg_session=${await t.session(bob.id)}`;
    const auth = { authorization: `Bearer ${key}` };
    expect((await t.chat(HI, auth)).status).toBe(200);

    expect(await disableUser(t.deps.db, ann.id, { now: t.clock.now })).toBe("disabled");
    expect((await findUserById(t.deps.db, ann.id))!.disabledAt).toBe(t.clock.now);
    const refused = await t.chat(HI, auth);
    expect(refused.status).toBe(401);
    expect((await jsonOf(refused)).error.message).toContain("disabled");
    expect((await t.request("/auth/me", { headers: { cookie } })).status).toBe(401);
    expect(t.deps.db.$client.query("SELECT user_id FROM sessions").all()).toEqual([{ user_id: bob.id }]);
    expect((await t.request("/auth/me", { headers: { cookie: bobCookie } })).status).toBe(200);

    t.clock.advance(1000);
    expect(await disableUser(t.deps.db, ann.id, { now: t.clock.now })).toBe("already_disabled");
    expect((await findUserById(t.deps.db, ann.id))!.disabledAt).toBe(t.clock.now - 1000);

    expect(await enableUser(t.deps.db, ann.id)).toBe("enabled");
    expect(await enableUser(t.deps.db, ann.id)).toBe("already_enabled");
    expect((await t.chat(HI, auth)).status).toBe(200);
    expect((await t.request("/auth/me", { headers: { cookie } })).status).toBe(401);
    expect(await disableUser(t.deps.db, 999)).toBe("not_found");
    expect(await enableUser(t.deps.db, 999)).toBe("not_found");
  });
});

describe("modelgate user disable / enable against the running binary", () => {
  let upstream: MockUpstream;
  let gw: RunningGateway;

  beforeAll(async () => {
    upstream = startMockUpstream();
    gw = await startGateway(`
[[upstreams]]
name = "mock"
base_url = "${upstream.url}"

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`);
  });

  afterAll(async () => {
    await gw?.stop();
    upstream?.stop();
  });

  test("a disabled user's key gets 401 within moments of the CLI change; enabling restores it", async () => {
    const { email, key } = await createUserKey(gw, { name: "disable-me" });
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 0 });
    const ask = () => client.chat.completions.create({ model: "free-model", messages: [{ role: "user", content: "hi" }] });
    expect((await ask()).choices[0].message.content).toBe("Hello from the mock upstream.");

    const disabled = await gw.cli(["user", "disable", email]);
    expect(disabled.code).toBe(0);
    expect(disabled.stdout).toContain(`disabled ${email}`);
    // Another process's change reaches the server's key cache within its 50 ms poll.
    let refused: unknown;
    await eventually(async () => (refused = await ask().catch((e: unknown) => e)) instanceof OpenAI.AuthenticationError);
    expect(refused).toBeInstanceOf(OpenAI.AuthenticationError);
    expect((refused as InstanceType<typeof OpenAI.AuthenticationError>).status).toBe(401);
    expect((refused as Error).message).toContain("disabled");
    expect((await gw.cli(["user", "disable", email])).stdout).toContain("already disabled");

    const enabled = await gw.cli(["user", "enable", email]);
    expect(enabled.code).toBe(0);
    expect(enabled.stdout).toContain(`enabled ${email}`);
    let answer: string | null | undefined;
    await eventually(
      async () =>
        (answer = await ask().then(
          (r) => r.choices[0].message.content,
          () => undefined,
        )) !== undefined,
    );
    expect(answer).toBe("Hello from the mock upstream.");
  });

  test("unknown users and missing arguments are usage errors that change nothing", async () => {
    const unknown = await gw.cli(["user", "disable", "nobody@example.com"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("no user with the email nobody@example.com");
    const missing = await gw.cli(["user", "enable"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("user disable EMAIL");
    const help = await gw.cli(["help"]);
    expect(help.stdout).toContain("user disable EMAIL | user enable EMAIL");
  });
});
