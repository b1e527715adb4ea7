/**
 * GitHub and Google sign-in through the real routes (/auth/{provider} and its callback) against a
 * loopback stand-in for the providers' authorize, token and profile endpoints. A browser (no
 * `Accept: application/json`) always ends on a dashboard page: `next` on success, the sign-in page
 * with an error code on failure; JSON callers get the gateway's error body.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { startOAuthStandIn, type OAuthStandIn } from "./oauth-provider";
import { buildAuthApp, type AuthTestApp, jsonOf } from "./support";
import { finishOAuth, stampLegacyLinks, userForProfile } from "../../src/auth/oauth";
import { captureLog } from "../support/log";

let provider: OAuthStandIn;
let t: AuthTestApp;

beforeAll(() => {
  provider = startOAuthStandIn({ id: "client-123", secret: "secret-456" });
});
afterAll(() => provider.stop());
afterEach(() => t?.close());

function app(auth: Record<string, unknown> = {}): AuthTestApp {
  const endpoints = {
    client_id: "client-123",
    client_secret: "secret-456",
    authorize_url: `${provider.url}/authorize`,
    token_url: `${provider.url}/token`,
    api_url: `${provider.url}/api`,
  };
  return buildAuthApp({ auth: { github: endpoints, google: endpoints, ...auth } });
}

interface Flow {
  start: Response;
  callback: Response;
}

const JSON_ACCEPT = { accept: "application/json" };

/** Browser steps: start, let the provider approve, come back to the callback with the cookies. */
async function signIn(
  name: "github" | "google",
  tamper: { state?: string; cookies?: (c: string[]) => string[]; headers?: Record<string, string>; next?: string } = {},
): Promise<Flow> {
  const start = await t.request(`/auth/${name}${tamper.next === undefined ? "" : `?next=${encodeURIComponent(tamper.next)}`}`);
  expect(start.status).toBe(302);
  let cookies = start.headers.getSetCookie().map((c) => c.split(";")[0]);
  if (tamper.cookies) cookies = tamper.cookies(cookies);
  const approved = await fetch(start.headers.get("location")!, { redirect: "manual" });
  expect(approved.status).toBe(302);
  const back = new URL(approved.headers.get("location")!);
  expect(back.origin + back.pathname).toBe(`http://localhost:8080/auth/${name}/callback`);
  if (tamper.state) back.searchParams.set("state", tamper.state);
  const callback = await t.request(back.pathname + back.search, { headers: { cookie: cookies.join("; "), ...tamper.headers } });
  return { start, callback };
}

async function signedInEmail(response: Response): Promise<string> {
  const cookie = response.headers
    .getSetCookie()
    .find((c) => c.startsWith("mg_session="))!
    .split(";")[0];
  const me = await t.request("/auth/me", { headers: { cookie } });
  return (await jsonOf(me)).user.email;
}

const count = (table: string): number => t.deps.db.$client.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${table}`).get()!.n;

describe("GitHub", () => {
  test("a new user with a verified email signs up (open policy) and lands on the dashboard", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "101", email: "Octo@Example.com", verified: true };
    const { start, callback } = await signIn("github");
    const authorize = new URL(start.headers.get("location")!);
    expect(authorize.searchParams.get("scope")).toBe("read:user user:email");
    expect(start.headers.getSetCookie()[0]).toMatch(/^mg_oauth_state=[^;]+; Path=\/auth; HttpOnly; SameSite=Lax; Max-Age=600/);
    expect(callback.status).toBe(303);
    expect(callback.headers.get("location")).toBe("/dashboard");
    expect(callback.headers.getSetCookie().some((c) => c.startsWith("mg_oauth_state=; Path=/auth") && c.includes("Max-Age=0"))).toBe(true);
    expect(await signedInEmail(callback)).toBe("octo@example.com");
    expect(t.deps.db.$client.query("SELECT provider, provider_user_id, user_id FROM oauth_accounts").all()).toEqual([
      { provider: `github ${provider.url}`, provider_user_id: "101", user_id: 1 },
    ]);
  });

  test("links to an existing user by verified email even with sign-up closed, then by account id", async () => {
    t = app();
    const existing = await t.user("dev@example.com", { password: "long enough" });
    provider.account = { id: "202", email: "dev@example.com", verified: true };
    expect((await signIn("github")).callback.status).toBe(303);
    provider.account = { id: "202", email: "changed@example.com", verified: true };
    const again = await signIn("github");
    expect(await signedInEmail(again.callback)).toBe("dev@example.com");
    expect(count("users")).toBe(1);
    expect(t.deps.db.$client.query("SELECT user_id FROM oauth_accounts").get()).toEqual({ user_id: existing.id });
  });

  test("an unverified email never links or creates an account", async () => {
    t = app({ signup: "open" });
    await t.user("victim@example.com");
    provider.account = { id: "303", email: "victim@example.com", verified: false };
    const { callback } = await signIn("github", { headers: JSON_ACCEPT });
    expect(callback.status).toBe(403);
    expect((await jsonOf(callback)).error.message).toContain("no verified email");
    const browser = (await signIn("github")).callback;
    expect(browser.status).toBe(303);
    expect(browser.headers.get("location")).toBe("/dashboard/signin?error=oauth_unverified");
    expect(browser.headers.getSetCookie().some((c) => c.startsWith("mg_oauth_state=;") && c.includes("Max-Age=0"))).toBe(true);
    expect(count("oauth_accounts")).toBe(0);
    expect(count("sessions")).toBe(0);
  });

  test("a verified email the gateway does not take as an address is named as such (regression: it was reported as no verified email)", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "606", email: "jdoe@example.com.", verified: true };
    const { callback } = await signIn("github", { headers: JSON_ACCEPT });
    expect(callback.status).toBe(403);
    expect((await jsonOf(callback)).error.message).toContain("is not one this gateway accepts as an address");
    expect((await signIn("github")).callback.headers.get("location")).toBe("/dashboard/signin?error=oauth_email_invalid");
    expect(count("users")).toBe(0);
  });

  test("a verified email never joins an account made by password sign-up (regression: a squatter who signed up with the victim's address shared the victim's account)", async () => {
    t = app({ signup: "open" });
    const signup = await t.request("/auth/signup", {
      method: "POST",
      headers: { ...JSON_ACCEPT, "content-type": "application/json" },
      body: JSON.stringify({ email: "victim@example.com", password: "squatter pw" }),
    });
    expect(signup.status).toBe(200);
    provider.account = { id: "505", email: "victim@example.com", verified: true };
    const { callback } = await signIn("github", { headers: JSON_ACCEPT });
    expect(callback.status).toBe(403);
    expect((await jsonOf(callback)).error.message).toContain("password sign-up, which does not prove the address");
    const browser = (await signIn("github")).callback;
    expect(browser.headers.get("location")).toBe("/dashboard/signin?error=oauth_unproven_account");
    expect(count("oauth_accounts")).toBe(0);
    expect(count("sessions")).toBe(1); // the sign-up's own
  });

  test("closed sign-up refuses a new account", async () => {
    t = app();
    provider.account = { id: "404", email: "stranger@example.com", verified: true };
    const { callback } = await signIn("github", { headers: JSON_ACCEPT });
    expect(callback.status).toBe(403);
    expect((await jsonOf(callback)).error.message).toContain("closed");
    const browser = (await signIn("github", { next: "/dashboard/usage" })).callback;
    expect(browser.headers.get("location")).toBe("/dashboard/signin?error=signup_closed&next=%2Fdashboard%2Fusage");
    expect(count("users")).toBe(0);
  });

  test("a state mismatch is rejected before the code is exchanged", async () => {
    t = app({ signup: "open" });
    const before = provider.tokenRequests;
    const forged = await signIn("github", { state: "forged-state", headers: JSON_ACCEPT });
    expect(forged.callback.status).toBe(400);
    expect((await jsonOf(forged.callback)).error.message).toContain("state mismatch");
    const noCookie = await signIn("github", { cookies: () => [] });
    expect(noCookie.callback.status).toBe(303);
    expect(noCookie.callback.headers.get("location")).toBe("/dashboard/signin?error=oauth_state");
    expect(provider.tokenRequests).toBe(before);
    expect(count("sessions")).toBe(0);
  });

  test("a cancelled sign-in and an unconfigured provider get clear errors", async () => {
    t = buildAuthApp();
    expect((await t.request("/auth/github", { headers: JSON_ACCEPT })).status).toBe(404);
    expect((await t.request("/auth/github")).headers.get("location")).toBe("/dashboard/signin?error=oauth_unavailable");
    const cancelled = await t.request("/auth/github/callback?error=access_denied&state=x", { headers: JSON_ACCEPT });
    expect(cancelled.status).toBe(400);
    expect((await jsonOf(cancelled)).error.message).toContain("access_denied");
    // The provider's text never reaches the page: only the code travels.
    const browser = await t.request("/auth/github/callback?error=%3Cscript%3Ephish%3C%2Fscript%3E&state=x");
    expect(browser.status).toBe(303);
    expect(browser.headers.get("location")).toBe("/dashboard/signin?error=oauth_cancelled");
    // Nor does a crafted link's text reach a JSON caller: only a code is quoted (regression: "<img src=x> call 555-1234 to verify").
    const crafted = await t.request("/auth/github/callback?error=%3Cimg%20src%3Dx%3E%20call%20555-1234%20to%20verify", { headers: JSON_ACCEPT });
    expect(crafted.status).toBe(400);
    expect((await jsonOf(crafted)).error.message).toBe("Sign-in was not completed at github");
  });

  test("success goes on to a safe next; an off-site next is ignored", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "505", email: "next@example.com", verified: true };
    const usage = await signIn("github", { next: "/dashboard/usage" });
    expect(usage.start.headers.getSetCookie()).toContain("mg_oauth_next=/dashboard/usage; Path=/auth; HttpOnly; SameSite=Lax; Max-Age=600");
    expect(usage.callback.headers.get("location")).toBe("/dashboard/usage");
    expect(usage.callback.headers.getSetCookie().some((c) => c.startsWith("mg_oauth_next=;") && c.includes("Max-Age=0"))).toBe(true);
    for (const next of [
      "https://evil.example/",
      "//evil.example",
      "/dashboard/../../evil",
      "/\\evil.example",
      "javascript:alert(1)",
      `/dashboard/${"a".repeat(5000)}`,
    ]) {
      expect((await signIn("github", { next })).callback.headers.get("location")).toBe("/dashboard");
    }
  });
});

describe("Google", () => {
  test("PKCE: the verifier from the cookie completes the exchange", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "g-1", email: "gee@example.com", verified: true };
    const { start, callback } = await signIn("google");
    const authorize = new URL(start.headers.get("location")!);
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("scope")).toBe("openid email profile");
    expect(callback.status).toBe(303);
    expect(await signedInEmail(callback)).toBe("gee@example.com");
  });

  test("a wrong PKCE verifier fails the exchange and signs nobody in", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "g-2", email: "gee2@example.com", verified: true };
    const { callback } = await signIn("google", {
      cookies: (c) => c.map((cookie) => (cookie.startsWith("mg_oauth_verifier=") ? "mg_oauth_verifier=wrong-verifier-wrong-verifier-wrong-verifier" : cookie)),
    });
    expect(callback.status).toBe(303);
    expect(callback.headers.get("location")).toBe("/dashboard/signin?error=oauth_failed");
    expect(count("sessions")).toBe(0);
  });
});

describe("provider servers and failures", () => {
  test("a link names its server: the same account id at another server is a stranger (regression: after api_url changed, whoever held the id there signed in to the linked account)", async () => {
    t = app({ signup: "open" });
    provider.account = { id: "201", email: "cli@example.com", verified: true };
    expect(await signedInEmail((await signIn("github")).callback)).toBe("cli@example.com");
    expect(t.deps.db.$client.query("SELECT provider FROM oauth_accounts").get()).toEqual({ provider: `github ${provider.url}` });
    const elsewhere = {
      provider: "github",
      server: "https://ghe.example.com",
      providerUserId: "201",
      email: "stranger@elsewhere.org",
      emailVerified: false,
    } as const;
    expect(await userForProfile(t.deps.db, t.deps.config, elsewhere)).toMatchObject({ reason: "oauth_unverified" });
    expect(await userForProfile(t.deps.db, t.deps.config, { ...elsewhere, server: provider.url })).toMatchObject({ email: "cli@example.com" });
  });

  test("links stored under the provider alone are taken to come from the server configured now", async () => {
    t = app();
    const user = await t.user("old@example.com");
    t.deps.db.$client.run(
      "INSERT INTO oauth_accounts (provider, provider_user_id, user_id, created_at) VALUES ('github', '7', ?1, 1), ('google', 'g7', ?1, 1)",
      [user.id],
    );
    expect(await stampLegacyLinks(t.deps.db, t.deps.config)).toBe(2);
    expect(t.deps.db.$client.query("SELECT provider FROM oauth_accounts ORDER BY provider").all()).toEqual([
      { provider: `github ${provider.url}` },
      { provider: `google ${provider.url}` },
    ]);
    expect(await stampLegacyLinks(t.deps.db, t.deps.config)).toBe(0);
    provider.account = { id: "7", email: "someone-else@example.com", verified: true };
    expect(await signedInEmail((await signIn("github")).callback)).toBe("old@example.com");
  });

  test("the code exchange gives up after the timeout, a profile over 1 MiB is refused, and each failure is logged by step and cause without the provider's text (regression: a silent provider held the callback for minutes)", async () => {
    const slow = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      async fetch(request) {
        const url = new URL(request.url);
        if (url.pathname === "/token" && new URLSearchParams(await request.text()).get("code") === "code-that-hangs") return new Promise<Response>(() => {});
        if (url.pathname === "/token") return Response.json({ access_token: "token-abc", token_type: "bearer" });
        return new Response(`{"id":1,"pad":"${"x".repeat(1_100_000)}"}`, { headers: { "content-type": "application/json" } });
      },
    });
    const captured = captureLog();
    try {
      const base = `http://127.0.0.1:${slow.port}`;
      t = buildAuthApp({ auth: { github: { client_id: "id", client_secret: "secret-456", token_url: `${base}/token`, api_url: base } } });
      const finish = (code: string) => finishOAuth(t.deps.config, "github", { code, state: "s", expectedState: "s", verifier: null }, { timeoutMs: 200 });
      expect(await finish("code-that-hangs")).toMatchObject({ status: 502, reason: "oauth_failed" });
      expect(await finish("code-that-works")).toMatchObject({ status: 502, reason: "oauth_failed" });
      t.close();
      t = app();
      t.deps.config.auth.github!.client_secret = "wrong-secret";
      expect((await signIn("github")).callback.headers.get("location")).toBe("/dashboard/signin?error=oauth_failed");
      const failures = captured
        .lines()
        .map((line) => JSON.parse(line))
        .filter((line) => line.msg.startsWith("github sign-in failed"));
      expect(failures.map(({ step, cause }) => ({ step, cause }))).toEqual([
        { step: "code exchange", cause: "no answer within 0.2 s" },
        { step: "profile read", cause: "the answer is over 1 MiB" },
        { step: "code exchange", cause: "the provider answered invalid_client" },
      ]);
      expect(captured.lines().join("")).not.toMatch(/secret-456|wrong-secret|token-abc|code-that/);
    } finally {
      captured.restore();
      slow.stop(true);
    }
  });
});
