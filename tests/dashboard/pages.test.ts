/**
 * The dashboard in process (app.handle over an in-memory database, real auth functions):
 * session and role checks on every page, CSRF and Origin on every form, a created key shown in
 * exactly one response (the page its form redirects to), escaping of untrusted names, and the usage queries behind the chart.
 */
import { describe, expect, test } from "bun:test";
import { buildTestApp } from "../support/app";
import { createApp } from "../../src/app";
import { dashboardRoutes } from "../../src/dashboard";
import { csrfToken, verifyCsrf } from "../../src/dashboard/csrf";
import { createUser, type User } from "../../src/auth/users";
import { createSession } from "../../src/auth/session";
import { createApiKey } from "../../src/auth/apikey";
import { requestLog, apiKeys, webhookJobs } from "../../src/db/schema";
import { dailyUsage, recentRequests } from "../../src/dashboard/usage-query";
import { barChart } from "../../src/dashboard/chart";
import { escapeHtml } from "../../src/dashboard/html";

const NOW = Date.UTC(2026, 5, 16, 12, 0, 0);
const ORIGIN = "http://localhost";

async function setup(extra: Record<string, unknown> = {}) {
  const t = buildTestApp(
    {
      ...extra,
      upstreams: [{ name: "local", base_url: "http://127.0.0.1:9/v1" }],
      models: [
        { id: "free-<b>model</b>", targets: [{ upstream: "local" }], free: true },
        { id: "paid-model", targets: [{ upstream: "local" }], price: { prompt: 1.5, completion: 3 } },
      ],
    },
    { now: () => NOW },
  );
  const app = createApp(t.deps, [dashboardRoutes(t.deps)]);
  const signIn = async (email: string, options: { admin?: boolean } = {}) => {
    const user = (await createUser(t.deps.db, { email, password: "correct horse", isAdmin: options.admin ?? false })) as User;
    const { token } = await createSession(t.deps.db, { userId: user.id, now: NOW, durationMs: 86_400_000 });
    return { user, cookie: `mg_session=${token}`, csrf: csrfToken(token) };
  };
  const get = (path: string, cookie?: string) => app.handle(new Request(`${ORIGIN}${path}`, { headers: cookie ? { cookie } : {} }));
  const post = (path: string, form: Record<string, string>, options: { cookie?: string; origin?: string } = {}) =>
    app.handle(
      new Request(`${ORIGIN}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          origin: options.origin ?? ORIGIN,
          ...(options.cookie ? { cookie: options.cookie } : {}),
        },
        body: new URLSearchParams(form).toString(),
      }),
    );
  return { ...t, app, signIn, get, post };
}

describe("dashboard pages", () => {
  test("without JavaScript the playground's form stays disabled and says why (regression: it sent the prompt in a GET URL)", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const page = await (await t.get("/dashboard/playground", alice.cookie)).text();
    expect(page).toContain('<fieldset id="pg-fields" disabled>');
    expect(page).toContain("<noscript>");
  });

  test("every page but sign-in needs a session and redirects there", async () => {
    const t = await setup();
    for (const path of ["/dashboard", "/dashboard/keys", "/dashboard/usage", "/dashboard/models", "/dashboard/playground", "/dashboard/admin"]) {
      const res = await t.get(path, "mg_session=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toStartWith("/dashboard/signin");
    }
    const signin = await t.get("/dashboard/signin");
    expect(signin.status).toBe(200);
    expect(signin.headers.get("content-type")).toContain("text/html");
    expect(await signin.text()).toContain('action="/auth/login"');
  });

  test("a form posted after the session ended leads back to its page after sign-in, not to the POST-only action (regression: a 404 page)", async () => {
    const t = await setup();
    const dead = "mg_session=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const cases: Array<[string, string]> = [
      ["/dashboard/keys", "/dashboard/keys"],
      ["/dashboard/keys/key_abc/revoke", "/dashboard/keys"],
      ["/dashboard/admin/credits", "/dashboard/admin"],
      ["/dashboard/admin/users/2/disable", "/dashboard/admin"],
    ];
    for (const [action, page] of cases) {
      const res = await t.post(action, { csrf: "x" }, { cookie: dead });
      // And the sign-in page says nothing was done (regression: it said nothing, so a Revoke looked done).
      expect({ action, location: res.headers.get("location") }).toEqual({
        action,
        location: `/dashboard/signin?next=${encodeURIComponent(page)}&error=signed_out`,
      });
    }
    const signin = await (await t.get("/dashboard/signin?next=%2Fdashboard%2Fkeys&error=signed_out")).text();
    expect(signin).toContain("Your session had ended, so the form you sent was not acted on. Sign in, then send it again.");
  });

  test("the sign-in page clears a session cookie that no longer signs in (regression: keyless API calls from that browser got 401 until sign-out)", async () => {
    const t = await setup();
    const stale = await t.get("/dashboard/signin", "mg_session=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    expect(stale.status).toBe(200);
    expect(stale.headers.get("set-cookie")).toStartWith("mg_session=; Path=/; HttpOnly; SameSite=Lax; Max-Age=0");
    expect((await t.get("/dashboard/signin")).headers.get("set-cookie")).toBeNull();
  });

  test("of two session cookies the one at the widest path counts, which only the gateway sets (regression: a cookie planted at /dashboard by a page on another port of the host took over)", async () => {
    const t = await setup();
    const victim = await t.signIn("victim@example.com");
    const attacker = await t.signIn("attacker@example.com");
    // Browsers send the cookie of the longer path first: the planted one, then the gateway's.
    const both = `${attacker.cookie}; ${victim.cookie}`;
    const page = await t.get("/dashboard/keys", both);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain("victim@example.com");
    expect(html).not.toContain("attacker@example.com");
  });

  test("sign-in offers sign-up and OAuth buttons only as configured", async () => {
    const closed = await setup();
    const closedPage = await (await closed.get("/dashboard/signin")).text();
    expect(closedPage).not.toContain("Create an account");
    expect(closedPage).not.toContain("Continue with");
    expect(await (await closed.get("/dashboard/signup")).text()).not.toContain('action="/auth/signup"');

    const open = await setup({
      auth: {
        signup: "open",
        github: { client_id: "id", client_secret: "github-client-secret" },
        google: { client_id: "gid", client_secret: "google-client-secret" },
      },
    });
    const openPage = await (await open.get("/dashboard/signin?next=/dashboard/usage")).text();
    expect(openPage).toContain('href="/dashboard/signup?next=%2Fdashboard%2Fusage"');
    expect(openPage).toContain('href="/auth/github?next=%2Fdashboard%2Fusage"');
    expect(openPage).toContain('<input type="hidden" name="next" value="/dashboard/usage">');
    expect(openPage).toContain("Continue with Google");
    expect(openPage).toContain('data-next="/dashboard/usage"');
    expect(openPage).not.toContain("client-secret");
    expect(await (await open.get("/dashboard/signup")).text()).toContain('action="/auth/signup"');
    const offsite = await (await open.get("/dashboard/signin?next=https://evil.example/")).text();
    expect(offsite).toContain('data-next="/dashboard"');
  });

  test("a non-admin gets 403 on every admin page and form, and nothing changes", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    expect((await t.get("/dashboard/admin", alice.cookie)).status).toBe(403);
    const grant = await t.post("/dashboard/admin/credits", { csrf: alice.csrf, user_id: String(alice.user.id), amount: "100" }, { cookie: alice.cookie });
    expect(grant.status).toBe(403);
    const create = await t.post(
      "/dashboard/admin/users",
      { csrf: alice.csrf, email: "mallory@example.com", password: "whatever123", admin: "1" },
      { cookie: alice.cookie },
    );
    expect(create.status).toBe(403);
    const users = t.deps.db.$client.query("SELECT email FROM users").all();
    expect(users).toEqual([{ email: "alice@example.com" }]);
    expect(t.deps.db.$client.query("SELECT count(*) AS n FROM ledger").get()).toEqual({ n: 0 });
  });

  test("an unknown dashboard path is a 404 page for the signed in, a redirect for others", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const missing = await t.get("/dashboard/nope", alice.cookie);
    expect(missing.status).toBe(404);
    expect(missing.headers.get("content-type")).toContain("text/html");
    expect((await t.get("/dashboard/nope")).status).toBe(303);
  });

  test("models page lists every route with price, free badge and upstream state, escaped", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const body = await (await t.get("/dashboard/models", alice.cookie)).text();
    expect(body).toContain("free-&lt;b&gt;model&lt;/b&gt;");
    expect(body).not.toContain("<b>model</b>");
    expect(body).toContain('data-model="paid-model"');
    expect(body).toMatch(/<td class="num">1.5<\/td>\s*<td class="num">3<\/td>/);
    expect(body).toContain('<span class="badge ok">free</span>');
    expect(body).toContain("healthy");
  });

  test("creating a key needs the CSRF token and our origin; the key is shown once", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const count = () => (t.deps.db.$client.query("SELECT count(*) AS n FROM api_keys").get() as { n: number }).n;

    const noToken = await t.post("/dashboard/keys", { name: "ci", expires: "never" }, { cookie: alice.cookie });
    expect(noToken.status).toBe(403);
    const wrongToken = await t.post("/dashboard/keys", { name: "ci", expires: "never", csrf: csrfToken("someone-else") }, { cookie: alice.cookie });
    expect(wrongToken.status).toBe(403);
    const crossSite = await t.post(
      "/dashboard/keys",
      { name: "ci", expires: "never", csrf: alice.csrf },
      { cookie: alice.cookie, origin: "https://evil.example" },
    );
    expect(crossSite.status).toBe(403);
    const badExpiry = await t.post("/dashboard/keys", { name: "ci", expires: "forever", csrf: alice.csrf }, { cookie: alice.cookie });
    expect(badExpiry.status).toBe(400);
    // A refused form comes back as it was sent, escaped (regression: the name typed was gone).
    const tooLong = await t.post("/dashboard/keys", { name: `"${"x".repeat(100)}`, expires: "90d", csrf: alice.csrf }, { cookie: alice.cookie });
    expect(tooLong.status).toBe(400);
    const refusedPage = await tooLong.text();
    expect(refusedPage).toContain(`value="&quot;${"x".repeat(100)}"`);
    expect(refusedPage).toContain('<option value="90d" selected>');
    expect(count()).toBe(0);

    const posted = await t.post("/dashboard/keys", { name: "ci <script>", expires: "30d", csrf: alice.csrf }, { cookie: alice.cookie });
    expect(posted.status).toBe(303);
    const shownAt = posted.headers.get("location")!;
    expect(shownAt).toMatch(/^\/dashboard\/keys\?created=[\w-]{24}$/);
    expect(await posted.text()).not.toContain("sk-mg-");
    const created = await t.get(shownAt, alice.cookie);
    expect(created.status).toBe(200);
    expect(created.headers.get("cache-control")).toBe("no-store");
    const page = await created.text();
    const key = /value="(sk-mg-[a-z2-7]+)"/.exec(page)?.[1];
    expect(key).toBeDefined();
    expect(page).toContain("ci &lt;script&gt;");
    const row = t.deps.db.select().from(apiKeys).get()!;
    expect(row.expiresAt).toBe(NOW + 30 * 86_400_000);
    expect(row.keyHash).not.toContain(key!);

    const list = await (await t.get("/dashboard/keys", alice.cookie)).text();
    expect(list).not.toContain(key!);
    expect(list).toContain(row.displayPrefix);
  });

  test("reloading the page that shows a new key neither shows it again nor makes another key (regression: the reload posted the form again)", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const bob = await t.signIn("bob@example.com");
    const posted = await t.post("/dashboard/keys", { name: "once", expires: "never", csrf: alice.csrf }, { cookie: alice.cookie });
    const shownAt = posted.headers.get("location")!;

    // Another session cannot take it, and trying does not spend it.
    const stolen = await (await t.get(shownAt, bob.cookie)).text();
    expect(stolen).not.toMatch(/value="sk-mg-/);
    expect(stolen).toContain("a key is shown once");
    const key = /value="(sk-mg-[a-z2-7]+)"/.exec(await (await t.get(shownAt, alice.cookie)).text())![1];

    const reloaded = await t.get(shownAt, alice.cookie);
    expect(reloaded.status).toBe(200);
    const again = await reloaded.text();
    expect(again).not.toContain(key);
    expect(again).toContain("a key is shown once");
    expect(
      t.deps.db
        .select()
        .from(apiKeys)
        .all()
        .map((k) => k.name),
    ).toEqual(["once"]);
  });

  test("the CSRF token is the base64url SHA-256 of a label and the session token, stable across releases", () => {
    // Computed independently (SHA-256 of "modelgate dashboard csrf v1\0abc"): forms rendered before
    // an upgrade must still verify after it.
    expect(csrfToken("abc")).toBe("l_w2_ACwnJnS3kqr853JGGueU-0iJB_jOtWZRMkrzdY");
    expect(verifyCsrf("abc", "l_w2_ACwnJnS3kqr853JGGueU-0iJB_jOtWZRMkrzdY")).toBe(true);
    expect(verifyCsrf("abd", "l_w2_ACwnJnS3kqr853JGGueU-0iJB_jOtWZRMkrzdY")).toBe(false);
    expect(verifyCsrf("abc", 42)).toBe(false);
  });

  test("a user can revoke only their own keys; revoked keys stay listed", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const bob = await t.signIn("bob@example.com");
    await t.post("/dashboard/keys", { name: "bobs", expires: "never", csrf: bob.csrf }, { cookie: bob.cookie });
    const bobKey = t.deps.db.select().from(apiKeys).get()!;
    const stolen = await t.post(`/dashboard/keys/${bobKey.id}/revoke`, { csrf: alice.csrf }, { cookie: alice.cookie });
    expect(stolen.status).toBe(404);
    expect(t.deps.db.select().from(apiKeys).get()!.revokedAt).toBeNull();

    const revoked = await t.post(`/dashboard/keys/${bobKey.id}/revoke`, { csrf: bob.csrf }, { cookie: bob.cookie });
    expect(revoked.status).toBe(303);
    expect(t.deps.db.select().from(apiKeys).get()!.revokedAt).toBe(NOW);
    const list = await (await t.get("/dashboard/keys", bob.cookie)).text();
    expect(list).toContain('data-status="revoked"');
  });

  test('a refused "Create a user" comes back as sent, but for the password (regression: the email typed was gone)', async () => {
    const t = await setup();
    const admin = await t.signIn("root@example.com", { admin: true });
    await t.signIn("taken@example.com");
    const refused = await t.post(
      "/dashboard/admin/users",
      { csrf: admin.csrf, email: "Taken@Example.com", password: "secret-password-1", admin: "1" },
      { cookie: admin.cookie },
    );
    expect(refused.status).toBe(400);
    const page = await refused.text();
    expect(page).toMatch(/<input id="new-email" [^>]*value="Taken@Example\.com">/);
    expect(page).toContain('<input type="checkbox" name="admin" value="1" checked>');
    expect(page).not.toContain("secret-password-1");
    const fresh = await (await t.get("/dashboard/admin", admin.cookie)).text();
    expect(fresh).toMatch(/<input id="new-email" [^>]*value="">/);
    expect(fresh).toContain('<input type="checkbox" name="admin" value="1">');
  });

  test("an admin grants credits, disables a user (their sessions end) and enables them again", async () => {
    const t = await setup();
    const admin = await t.signIn("root@example.com", { admin: true });
    const alice = await t.signIn("alice@example.com");
    const bad = await t.post("/dashboard/admin/credits", { csrf: admin.csrf, user_id: String(alice.user.id), amount: "1.2345678" }, { cookie: admin.cookie });
    expect(bad.status).toBe(400);
    // The message names every rule, the one-grant limit too (regression: 9000000000 was told to be "positive").
    const tooMuch = await t.post(
      "/dashboard/admin/credits",
      { csrf: admin.csrf, user_id: String(alice.user.id), amount: "9000000000" },
      { cookie: admin.cookie },
    );
    expect(tooMuch.status).toBe(400);
    expect(await tooMuch.text()).toContain("at most 1,000,000,000 in one grant");
    // A notice comes from a fixed table, never from the prototype (regression: ?done=constructor showed "function Object()").
    for (const done of ["constructor", "toString", "__proto__"]) {
      expect(await (await t.get(`/dashboard/admin?done=${done}`, admin.cookie)).text()).not.toMatch(/native code|object Object/);
    }
    const grant = await t.post(
      "/dashboard/admin/credits",
      { csrf: admin.csrf, user_id: String(alice.user.id), amount: "12.5", note: "  welcome\r\nback  " },
      { cookie: admin.cookie },
    );
    expect(grant.status).toBe(303);
    expect(t.deps.db.$client.query("SELECT note FROM ledger WHERE user_id = ?").all(alice.user.id)).toEqual([{ note: "welcome back" }]);
    await createApiKey(t.deps.db, { userId: alice.user.id, name: "laptop" });
    const usage = await (await t.get("/dashboard/usage", alice.cookie)).text();
    expect(usage).toContain('data-micro="12500000"');

    const disable = await t.post(`/dashboard/admin/users/${alice.user.id}/disable`, { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(disable.status).toBe(303);
    expect((await t.get("/dashboard/keys", alice.cookie)).status).toBe(303);
    expect(t.deps.db.$client.query("SELECT count(*) AS n FROM sessions WHERE user_id = ?").get(alice.user.id)).toEqual({ n: 0 });
    const adminPage = await (await t.get("/dashboard/admin", admin.cookie)).text();
    expect(adminPage).toContain(`action="/dashboard/admin/users/${alice.user.id}/enable"`);
    // Her key is listed as refused for its owner, not as active (regression: "active").
    expect(adminPage).toContain('<span class="badge bad">owner disabled</span>');

    const enable = await t.post(`/dashboard/admin/users/${alice.user.id}/enable`, { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(enable.status).toBe(303);
    expect(t.deps.db.$client.query("SELECT disabled_at FROM users WHERE id = ?").get(alice.user.id)).toEqual({ disabled_at: null });
    const self = await t.post(`/dashboard/admin/users/${admin.user.id}/disable`, { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(self.status).toBe(400);
    const missing = await t.post("/dashboard/admin/users/999/disable", { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(missing.status).toBe(404);
  });

  test("an admin marks an unproven address proven in the page, as `user verify` does; others cannot", async () => {
    const t = await setup();
    const admin = await t.signIn("root@example.com", { admin: true });
    const alice = await t.signIn("alice@example.com");
    const squatted = (await createUser(t.deps.db, { email: "mallory@example.com", password: "correct horse", emailUnverified: true })) as User;
    const unproven = () =>
      t.deps.db.$client.query<{ email_unverified: number }, [number]>("SELECT email_unverified FROM users WHERE id = ?").get(squatted.id)!.email_unverified;
    const before = await (await t.get("/dashboard/admin", admin.cookie)).text();
    expect(before).toContain(`action="/dashboard/admin/users/${squatted.id}/verify"`);
    // Only the unproven account offers it.
    expect(before).not.toContain(`action="/dashboard/admin/users/${alice.user.id}/verify"`);
    expect(before.match(/>unproven</g)).toHaveLength(1);
    const refused = await t.post(`/dashboard/admin/users/${squatted.id}/verify`, { csrf: alice.csrf }, { cookie: alice.cookie });
    expect(refused.status).not.toBe(303);
    const wrongCsrf = await t.post(`/dashboard/admin/users/${squatted.id}/verify`, { csrf: alice.csrf }, { cookie: admin.cookie });
    expect(wrongCsrf.status).not.toBe(303);
    expect(unproven()).toBe(1);
    const proven = await t.post(`/dashboard/admin/users/${squatted.id}/verify`, { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(proven.status).toBe(303);
    expect(proven.headers.get("location")).toBe("/dashboard/admin?done=verify");
    expect(unproven()).toBe(0);
    const after = await (await t.get("/dashboard/admin?done=verify", admin.cookie)).text();
    expect(after).toContain("The address was marked proven.");
    expect(after).not.toContain(`/users/${squatted.id}/verify`);
    expect((await t.post("/dashboard/admin/users/999/verify", { csrf: admin.csrf }, { cookie: admin.cookie })).status).toBe(404);
    // Marking it again says so, as the CLI does.
    const again = await t.post(`/dashboard/admin/users/${squatted.id}/verify`, { csrf: admin.csrf }, { cookie: admin.cookie });
    expect(again.headers.get("location")).toBe("/dashboard/admin?done=already_proven");
  });

  test("a user id in an admin form is decimal digits only (regression: 0x2, +2 and 2.0 acted on user 2)", async () => {
    const t = await setup();
    const admin = await t.signIn("root@example.com", { admin: true });
    const alice = await t.signIn("alice@example.com");
    expect(alice.user.id).toBe(2);
    for (const id of ["0x2", "+2", "2.0", "02", " 2", "2 ", "0b10", "2e0"]) {
      const disable = await t.post(`/dashboard/admin/users/${encodeURIComponent(id)}/disable`, { csrf: admin.csrf }, { cookie: admin.cookie });
      expect({ id, status: disable.status }).toEqual({ id, status: 404 });
      const grant = await t.post("/dashboard/admin/credits", { csrf: admin.csrf, user_id: id, amount: "1" }, { cookie: admin.cookie });
      expect({ id, status: grant.status }).toEqual({ id, status: 400 });
    }
    expect(t.deps.db.$client.query("SELECT disabled_at FROM users WHERE id = 2").get()).toEqual({ disabled_at: null });
    expect(t.deps.db.$client.query("SELECT count(*) AS n FROM ledger").get()).toEqual({ n: 0 });
    expect((await t.post("/dashboard/admin/users/2/disable", { csrf: admin.csrf }, { cookie: admin.cookie })).status).toBe(303);
  });

  test("a key name is up to 100 characters, counted as characters (an emoji is one)", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    const name = `💥${"k".repeat(99)}`;
    expect((await t.post("/dashboard/keys", { name, expires: "never", csrf: alice.csrf }, { cookie: alice.cookie })).status).toBe(303);
    expect((await t.post("/dashboard/keys", { name: `${name}k`, expires: "never", csrf: alice.csrf }, { cookie: alice.cookie })).status).toBe(400);
    expect(
      t.deps.db
        .select()
        .from(apiKeys)
        .all()
        .map((k) => k.name),
    ).toEqual([name]);
  });

  test("a form posted as JSON with fields that are not strings is a 400 page, never a 500, and writes nothing", async () => {
    const t = await setup();
    const admin = await t.signIn("root@example.com", { admin: true });
    const count = (table: string) => (t.deps.db.$client.query(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n;
    const postJson = (path: string, fields: Record<string, unknown>) =>
      t.app.handle(
        new Request(`${ORIGIN}${path}`, {
          method: "POST",
          headers: { "content-type": "application/json", origin: ORIGIN, cookie: admin.cookie },
          body: JSON.stringify({ csrf: admin.csrf, ...fields }),
        }),
      );
    for (const odd of [{ toString: 1 }, ["x"], 12, null, true]) {
      expect((await postJson("/dashboard/keys", { name: odd, expires: "30d" })).status).toBe(400);
      expect((await postJson("/dashboard/admin/users", { email: odd, password: "long enough pw" })).status).toBe(400);
      expect((await postJson("/dashboard/admin/credits", { user_id: String(admin.user.id), amount: odd })).status).toBe(400);
    }
    expect([count("api_keys"), count("users"), count("ledger")]).toEqual([0, 1, 0]);
    // Fields that may be left out (a note, a password) count as left out.
    expect((await postJson("/dashboard/admin/credits", { user_id: String(admin.user.id), amount: "1", note: { toString: 1 } })).status).toBe(303);
    expect((await postJson("/dashboard/admin/users", { email: "new@example.com", password: { toString: 1 } })).status).toBe(303);
    expect([count("users"), count("ledger")]).toEqual([2, 1]);
  });

  test("the admin page shows the webhook outbox when webhooks are enabled", async () => {
    const off = await setup();
    const offAdmin = await off.signIn("root@example.com", { admin: true });
    expect(await (await off.get("/dashboard/admin", offAdmin.cookie)).text()).not.toContain("Webhook outbox");

    const t = await setup({ webhooks: { enabled: true, endpoints: [{ path: "/hooks/alert", job_id: 7 }] } });
    const admin = await t.signIn("root@example.com", { admin: true });
    t.deps.db
      .insert(webhookJobs)
      .values([
        { jobId: 7, serviceId: 1, path: "/hooks/alert", body: Buffer.from("{}"), createdAt: NOW, state: "pending" },
        { jobId: 7, serviceId: 1, path: "/hooks/alert", body: Buffer.from("{}"), createdAt: NOW, state: "dead", lastError: "exit <1>" },
      ])
      .run();
    const page = await (await t.get("/dashboard/admin", admin.cookie)).text();
    expect(page).toContain("Webhook outbox");
    expect(page).toContain("pending: 1");
    expect(page).toContain("dead: 1");
    expect(page).toContain("exit &lt;1&gt;");
  });

  test("sign-out needs this origin, not a current CSRF token (regression: a tab opened under an earlier session answered its Sign out as if done, and the session went on)", async () => {
    const t = await setup();
    const alice = await t.signIn("alice@example.com");
    // Another site's form, which the browser sends without the cookie, clears nothing (regression: it signed the browser out).
    const crossSite = await t.post("/dashboard/signout", {}, { origin: "https://evil.example" });
    expect(crossSite.headers.get("set-cookie")).toBeNull();
    const withCookie = await t.post("/dashboard/signout", { csrf: alice.csrf }, { cookie: alice.cookie, origin: "https://evil.example" });
    expect(withCookie.headers.get("set-cookie")).toBeNull();
    expect((await t.get("/dashboard/keys", alice.cookie)).status).toBe(200);
    // An older tab's page holds the CSRF token of the session it was opened under.
    const older = await createSession(t.deps.db, { userId: alice.user.id, now: NOW, durationMs: 86_400_000 });
    const out = await t.post("/dashboard/signout", { csrf: csrfToken(older.token) }, { cookie: alice.cookie });
    expect(out.status).toBe(303);
    expect(out.headers.get("set-cookie")).toContain("Max-Age=0");
    expect((await t.get("/dashboard/keys", alice.cookie)).status).toBe(303);
  });

  test("assets are served from the binary with a content type", async () => {
    const t = await setup();
    const css = await t.get("/dashboard/assets/style.css");
    expect(css.headers.get("content-type")).toContain("text/css");
    expect(await css.text()).toContain(".chart");
    const js = await t.get("/dashboard/assets/app.js");
    expect(js.headers.get("content-type")).toContain("javascript");
    expect(await js.text()).toContain("/v1/chat/completions");
  });
});

describe("usage queries and chart", () => {
  test("daily usage groups by UTC day and model, only for the user, within the window", async () => {
    const t = await setup();
    const day = 86_400_000;
    const row = (userId: number | null, model: string, createdAt: number, tokens: number, cost: number) => ({
      requestId: `req_${Math.random()}`,
      createdAt,
      identity: "api_key",
      userId,
      keyId: null,
      model,
      upstream: "local",
      status: 200,
      promptTokens: tokens,
      completionTokens: 1,
      costMicro: cost,
      latencyMs: 5,
    });
    t.deps.db
      .insert(requestLog)
      .values([
        row(1, "a", NOW, 10, 100),
        row(1, "a", NOW - 1000, 5, 50),
        row(1, "b", NOW - day, 1, 7),
        row(1, "a", NOW - 40 * day, 99, 99),
        row(2, "a", NOW, 1000, 1000),
        row(null, "a", NOW, 1, 1),
      ])
      .run();
    const rows = await dailyUsage(t.deps.db, { userId: 1, since: NOW - 29 * day });
    expect(rows.sort((x, y) => x.day.localeCompare(y.day))).toEqual([
      { day: "2026-06-15", model: "b", requests: 1, tokens: 2, costMicro: 7 },
      { day: "2026-06-16", model: "a", requests: 2, tokens: 17, costMicro: 150 },
    ]);
    expect((await recentRequests(t.deps.db, { userId: 1, limit: 2 })).map((r) => r.createdAt)).toEqual([NOW, NOW - 1000]);
  });

  test("the chart's axis labels fit (compact) and no bar rises above the plot, whatever the magnitudes (regression: 0.046 read as 46043, bars drawn past the top)", () => {
    const values = (n: number) => [n, 1, 0.5];
    const svg = barChart({
      id: "c",
      title: "Tokens",
      days: ["2026-06-14", "2026-06-15", "2026-06-16"],
      series: [{ name: "huge", values: values(2_000_161_413) }, ...Array.from({ length: 40 }, (_, i) => ({ name: `m${i}`, values: values(3) }))],
      format: (v) => v.toLocaleString("en"),
    }).value;
    const labels = [...svg.matchAll(/<text x="44" [^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    expect(labels).toEqual(["3B", "1.5B", "0"]);
    for (const m of svg.matchAll(/<rect [^>]*y="([\d.-]+)" [^>]*height="([\d.-]+)"/g)) {
      expect(Number(m[1])).toBeGreaterThanOrEqual(10 - 0.05); // PAD.top
      expect(Number(m[2])).toBeGreaterThanOrEqual(0);
    }
    const small = barChart({
      id: "d",
      title: "Credits",
      days: ["2026-06-16"],
      series: [{ name: "a", values: [46_043] }],
      format: String,
      axisScale: 1_000_000,
    }).value;
    const axis = (svg: string) => [...svg.matchAll(/<text x="44" [^>]*>([^<]*)<\/text>/g)].map((m) => m[1]);
    expect(axis(small)).toEqual(["0.05", "0.025", "0"]);
    // Under 0.001 credits in millionths, and the middle line a whole count (regression: "0.000204" was cut to "00204" on the page, and "0.0000005" or "16.5" requests read at the middle).
    const chart = (values: number[], axisScale?: number) =>
      barChart({ id: "e", title: "t", days: values.map((_, i) => `2026-06-${10 + i}`), series: [{ name: "a", values }], format: String, axisScale }).value;
    expect(axis(chart([68, 204], 1_000_000))).toEqual(["300µ", "150µ", "0"]);
    expect(axis(chart([0, 0], 1_000_000))).toEqual(["2µ", "1µ", "0"]);
    expect(axis(chart([33, 7]))).toEqual(["40", "20", "0"]);
    expect(axis(chart([3]))).toEqual(["4", "2", "0"]);
    expect(axis(chart([10]))).toEqual(["10", "5", "0"]);
  });

  test("the SVG chart totals per day and escapes model names", () => {
    const svg = barChart({
      id: "c",
      title: "Requests",
      days: ["2026-06-15", "2026-06-16"],
      series: [
        { name: "<x>", values: [1, 2] },
        { name: "y", values: [0, 3] },
      ],
      format: String,
    }).value;
    expect(svg).toContain('data-total="6"');
    expect(svg).toContain('data-day="2026-06-16" data-value="5"');
    expect(svg).toContain(escapeHtml("<x>"));
    expect(svg).not.toContain("<x>");
  });
});
