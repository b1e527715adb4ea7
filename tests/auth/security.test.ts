/**
 * The security table: every protected route x every bad credential -> the right status and the
 * documented error body, no secret echoed back, and nothing served by the upstream.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { apiKeys, users } from "../../src/db/schema";
import { eq } from "drizzle-orm";
import { generateApiKey } from "../../src/auth/apikey";
import { randomToken, sha256Hex } from "../../src/auth/tokens";
import { grantCredits } from "../../src/credits/ledger";
import { buildAuthApp, type AuthTestApp, jsonOf } from "./support";

let t: AuthTestApp;
const creds: Record<string, Record<string, string>> = {};
let secrets: string[] = [];

beforeAll(async () => {
  t = buildAuthApp();
  const user = await t.user("alice@example.com");
  const admin = await t.user("root@example.com", { isAdmin: true });
  const disabled = await t.user("gone@example.com");
  await grantCredits(t.deps.db, { userId: user.id, micro: 10_000_000 });
  const valid = await t.key(user.id);
  const expired = await t.key(user.id, { expiresAt: t.clock.now - 1 });
  const revoked = await t.key(user.id);
  t.deps.db
    .update(apiKeys)
    .set({ revokedAt: t.clock.now })
    .where(eq(apiKeys.keyHash, sha256Hex(revoked)))
    .run();
  const disabledKey = await t.key(disabled.id);
  const disabledSession = await t.session(disabled.id);
  t.deps.db.update(users).set({ disabledAt: t.clock.now }).where(eq(users.id, disabled.id)).run();
  const session = await t.session(user.id);
  const tampered = session.slice(0, -1) + (session.endsWith("a") ? "b" : "a");
  const badChecksum = valid.slice(0, -1) + (valid.endsWith("a") ? "b" : "a");
  const bearer = (key: string) => ({ authorization: `Bearer ${key}` });
  const cookie = (token: string) => ({ cookie: `mg_session=${token}`, origin: "http://localhost" });
  Object.assign(creds, {
    "no credential": {},
    "not a bearer header": { authorization: `Basic ${btoa("alice:secret")}` },
    "malformed key": bearer("sk-mg-short"),
    "foreign key format": bearer("sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"),
    "bad checksum": bearer(badChecksum),
    "unknown key": bearer(generateApiKey()),
    "expired key": bearer(expired),
    "revoked key": bearer(revoked),
    "disabled owner's key": bearer(disabledKey),
    "wrong cookie": cookie(randomToken(20)),
    "tampered cookie": cookie(tampered),
    "empty cookie": cookie(""),
    "disabled user's session": cookie(disabledSession),
    "valid key": bearer(valid),
    "valid session": cookie(session),
    "admin session": cookie(await t.session(admin.id)),
    "payment signature, SpendAuth off": { "x-payment-signature": JSON.stringify({ commitment: "0x01", amount: "1" }) },
  });
  secrets = [valid, expired, revoked, badChecksum, tampered, session, disabledKey];
});

afterAll(() => t.close());

type Expect = [status: number, code: string | null, message?: RegExp];

const chatPaid = { model: "paid-model", messages: [{ role: "user", content: "hi" }] };
const chatFree = { model: "free-model", messages: [{ role: "user", content: "hi" }] };

const ROUTES: Array<{ name: string; send: (headers: Record<string, string>) => Promise<Response>; table: Record<string, Expect> }> = [
  {
    name: "POST /v1/chat/completions (paid model)",
    send: (headers) => t.chat(chatPaid, headers),
    table: {
      "no credential": [401, "authentication_required", /not free: authenticate with an API key/],
      "not a bearer header": [401, "invalid_api_key", /must be "Bearer sk-mg-/],
      "malformed key": [401, "invalid_api_key", /malformed/],
      "foreign key format": [401, "invalid_api_key", /malformed/],
      "bad checksum": [401, "invalid_api_key", /checksum/],
      "unknown key": [401, "invalid_api_key", /not valid/],
      "expired key": [401, "invalid_api_key", /expired/],
      "revoked key": [401, "invalid_api_key", /revoked/],
      "disabled owner's key": [401, "invalid_api_key", /disabled/],
      "wrong cookie": [401, "invalid_session", /not valid/],
      "tampered cookie": [401, "invalid_session", /not valid/],
      "empty cookie": [401, "invalid_session", /not valid/],
      "disabled user's session": [401, "invalid_session", /disabled/],
      "payment signature, SpendAuth off": [401, "spend_auth_disabled", /not configured/],
      "valid key": [200, null],
      "valid session": [200, null],
    },
  },
  {
    name: "POST /v1/chat/completions (free model)",
    send: (headers) => t.chat(chatFree, headers),
    table: {
      "no credential": [200, null],
      "malformed key": [401, "invalid_api_key", /malformed/],
      "bad checksum": [401, "invalid_api_key", /checksum/],
      "unknown key": [401, "invalid_api_key", /not valid/],
      "expired key": [401, "invalid_api_key", /expired/],
      "revoked key": [401, "invalid_api_key", /revoked/],
      "wrong cookie": [401, "invalid_session", /not valid/],
      "tampered cookie": [401, "invalid_session", /not valid/],
      "payment signature, SpendAuth off": [401, "spend_auth_disabled"],
      "valid key": [200, null],
    },
  },
  {
    // Credentials are judged before the body and the model, as OpenAI does (regression: an invalid key with an unknown model got 404).
    name: "POST /v1/chat/completions (unknown model)",
    send: (headers) => t.chat({ model: "no-such-model", messages: [{ role: "user", content: "hi" }] }, headers),
    table: {
      "no credential": [404, "model_not_found"],
      "malformed key": [401, "invalid_api_key", /malformed/],
      "bad checksum": [401, "invalid_api_key", /checksum/],
      "expired key": [401, "invalid_api_key", /expired/],
      "revoked key": [401, "invalid_api_key", /revoked/],
      "wrong cookie": [401, "invalid_session", /not valid/],
      "disabled user's session": [401, "invalid_session", /disabled/],
      "payment signature, SpendAuth off": [401, "spend_auth_disabled"],
      "valid key": [404, "model_not_found"],
      "valid session": [404, "model_not_found"],
    },
  },
  {
    name: "POST /v1/chat/completions (body not JSON)",
    send: (headers) => t.request("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: "{" }),
    table: {
      "no credential": [400, "invalid_request_error", /not valid JSON/],
      "unknown key": [401, "invalid_api_key", /not valid/],
      "tampered cookie": [401, "invalid_session", /not valid/],
      "valid key": [400, "invalid_request_error", /not valid JSON/],
    },
  },
  {
    name: "POST /api/admin/credits",
    send: (headers) =>
      t.request("/api/admin/credits", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ email: "alice@example.com", amount: "1" }),
      }),
    table: {
      "no credential": [401, "invalid_session", /Sign in/],
      "malformed key": [401, "invalid_session"],
      "unknown key": [401, "invalid_session"],
      "valid key": [401, "invalid_session"],
      "wrong cookie": [401, "invalid_session", /not valid/],
      "tampered cookie": [401, "invalid_session", /not valid/],
      "disabled user's session": [401, "invalid_session", /disabled/],
      "valid session": [403, "forbidden", /administrator/],
      "admin session": [200, null],
    },
  },
  {
    name: "GET /auth/me",
    send: (headers) => t.request("/auth/me", { headers }),
    table: {
      "no credential": [401, "invalid_session"],
      "valid key": [401, "invalid_session"],
      "wrong cookie": [401, "invalid_session"],
      "tampered cookie": [401, "invalid_session"],
      "valid session": [200, null],
    },
  },
];

for (const route of ROUTES) {
  describe(route.name, () => {
    for (const [credential, [status, code, message]] of Object.entries(route.table)) {
      test(`${credential} -> ${status}${code ? ` ${code}` : ""}`, async () => {
        const before = t.upstream.chatCount();
        const response = await route.send(creds[credential]);
        const text = await response.text();
        expect(response.status).toBe(status);
        expect(response.headers.get("x-request-id")).toMatch(/^req_/);
        for (const secret of secrets) expect(text).not.toContain(secret);
        if (code === null) return;
        const body = JSON.parse(text);
        expect(Object.keys(body.error).sort()).toEqual(["code", "message", "param", "type"]);
        expect(body.error.code).toBe(code);
        expect(typeof body.error.message).toBe("string");
        if (message) expect(body.error.message).toMatch(message);
        expect(t.upstream.chatCount()).toBe(before);
      });
    }
  });
}

describe("sessions and Origin", () => {
  test("a cross-site POST with a valid session cookie is refused", async () => {
    const headers = { ...creds["valid session"], origin: "https://evil.example" };
    const chat = await t.chat(chatFree, headers);
    expect(chat.status).toBe(403);
    expect((await jsonOf(chat)).error.code).toBe("forbidden");
    const admin = await t.request("/api/admin/credits", {
      method: "POST",
      headers: { ...creds["admin session"], origin: "https://evil.example", "content-type": "application/json" },
      body: "{}",
    });
    expect(admin.status).toBe(403);
  });

  test("without Origin, Sec-Fetch-Site: cross-site is refused and same-origin is fine", async () => {
    const { cookie } = creds["valid session"];
    expect((await t.chat(chatFree, { cookie, "sec-fetch-site": "cross-site" })).status).toBe(403);
    expect((await t.chat(chatFree, { cookie, "sec-fetch-site": "same-origin" })).status).toBe(200);
  });

  test("the public_url origin is accepted", async () => {
    expect((await t.chat(chatFree, { ...creds["valid session"], origin: "http://localhost:8080" })).status).toBe(200);
  });
});
