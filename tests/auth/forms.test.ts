/**
 * Sign-in, sign-up and first-run setup as plain form posts (no client script): every refusal
 * comes back as its page with a clear message, success goes to a safe `next`, and nothing the
 * visitor typed (email, password) or any text of a URL's own reaches the redirect or the page.
 * In process, with the identities routes and the dashboard mounted together as the server does.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createApp } from "../../src/app";
import { dashboardRoutes } from "../../src/dashboard";
import { disableUser } from "../../src/auth/users";
import { issueSetupLink } from "../../src/auth/setup";
import { buildAuthApp, jsonOf, type AuthTestApp } from "./support";

let t: AuthTestApp;
const open: AuthTestApp[] = [];
afterEach(() => {
  for (const app of open.splice(0)) app.close();
});

const PASSWORD = "correct horse battery";

function withPages(raw: Record<string, unknown> = {}): {
  post(path: string, fields: Record<string, string>, headers?: Record<string, string>): Promise<Response>;
  get(path: string): Promise<Response>;
} {
  t = buildAuthApp(raw);
  open.push(t);
  const app = createApp(t.deps, [t.identities.routes, dashboardRoutes(t.deps)]);
  return {
    post: (path, fields, headers = {}) =>
      app.handle(
        new Request(`http://localhost${path}`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded", origin: "http://localhost", accept: "text/html", ...headers },
          body: new URLSearchParams(fields).toString(),
        }),
      ),
    get: (path) => app.handle(new Request(`http://localhost${path}`, { headers: { accept: "text/html" } })),
  };
}

/** The alert a page shows, or null when it shows none. */
function alertOf(page: string): string | null {
  return /<p class="notice error form-error" role="alert">([^<]*)<\/p>/.exec(page)?.[1] ?? null;
}

describe("sign-in without JavaScript", () => {
  test("a wrong password comes back as the sign-in page with a message; no email or password in the URL or page", async () => {
    const pages = withPages();
    await t.user("ann@example.com", { password: PASSWORD });
    const refused = await pages.post("/auth/login", { email: "ann@example.com", password: "wrong-secret-123", next: "/dashboard/usage" });
    expect(refused.status).toBe(303);
    expect(refused.headers.get("set-cookie")).toBeNull();
    const location = refused.headers.get("location")!;
    expect(location).toBe("/dashboard/signin?error=credentials&next=%2Fdashboard%2Fusage");
    const page = await pages.get(location);
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    const html = await page.text();
    expect(alertOf(html)).toBe("The email or password is incorrect.");
    expect(html).toContain('<input type="hidden" name="next" value="/dashboard/usage">');
    expect(html).not.toContain("wrong-secret-123");
    expect(html).not.toContain("ann@example.com");
  });

  test("success goes to a safe next; anything else goes to /dashboard", async () => {
    const pages = withPages();
    await t.user("ann@example.com", { password: PASSWORD });
    const usage = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD, next: "/dashboard/usage" });
    expect(usage.status).toBe(303);
    expect(usage.headers.get("location")).toBe("/dashboard/usage");
    expect(usage.headers.get("set-cookie")).toStartWith("mg_session=");
    const offsite = [
      "https://evil.example/",
      "//evil.example/dashboard",
      "/dashboard/../../evil",
      "/\\evil.example",
      "/dashboard?x=https://evil.example",
      "javascript:alert(1)",
      "/dashboardevil",
    ];
    for (const next of offsite) {
      t.clock.advance(60_000); // every attempt counts against the account's throttle
      const response = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD, next });
      expect(response.headers.get("location")).toBe("/dashboard");
    }
    const wrong = await pages.post("/auth/login", { email: "ann@example.com", password: "nope", next: "https://evil.example/" });
    expect(wrong.headers.get("location")).toBe("/dashboard/signin?error=credentials");
  });

  test("throttling and a disabled account are explained on the page; JSON callers keep JSON", async () => {
    const pages = withPages();
    const ann = await t.user("ann@example.com", { password: PASSWORD });
    await disableUser(t.deps.db, ann.id);
    const wrong = await pages.post("/auth/login", { email: "ann@example.com", password: "not it" });
    expect(wrong.headers.get("location")).toBe("/dashboard/signin?error=credentials");
    const right = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD });
    expect(right.headers.get("location")).toBe("/dashboard/signin?error=disabled");
    expect(alertOf(await (await pages.get(right.headers.get("location")!)).text())).toBe("This account is disabled. Ask an administrator to enable it.");
    const json = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD }, { accept: "application/json" });
    expect(json.status).toBe(403);
    expect((await jsonOf(json)).error).toMatchObject({ code: "forbidden", message: "This account is disabled" });
    for (let i = 0; i < 2; i++) await pages.post("/auth/login", { email: "ann@example.com", password: "guess" });
    const throttled = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD });
    expect(throttled.status).toBe(303);
    expect(throttled.headers.get("location")).toBe("/dashboard/signin?error=throttled");
    expect(alertOf(await (await pages.get(throttled.headers.get("location")!)).text())).toStartWith("Too many attempts.");
    const throttledJson = await pages.post("/auth/login", { email: "ann@example.com", password: PASSWORD }, { accept: "application/json" });
    expect(throttledJson.status).toBe(429);
    expect(throttledJson.headers.get("retry-after")).not.toBeNull();
  });

  test("a code the gateway did not send shows nothing", async () => {
    const pages = withPages({ auth: { signup: "open" } });
    for (const code of ["%3Cscript%3Ealert(1)%3C%2Fscript%3E", "__proto__", "toString", "Your+account+is+locked.+Call+555-0100"]) {
      for (const path of ["/dashboard/signin", "/dashboard/signup"]) {
        const html = await (await pages.get(`${path}?error=${code}`)).text();
        expect(alertOf(html)).toBeNull();
        expect(html).not.toContain("<script>alert");
        expect(html).not.toContain("555-0100");
      }
    }
  });
});

describe("sign-up without JavaScript", () => {
  test("each refusal comes back as the sign-up page with its message", async () => {
    const cases: Array<{ auth: Record<string, unknown>; fields: Record<string, string>; code: string; message: string }> = [
      { auth: {}, fields: { email: "new@example.com", password: PASSWORD }, code: "signup_closed", message: "Sign-up is closed" },
      { auth: { signup: "open" }, fields: { email: "not-an-email", password: PASSWORD }, code: "email", message: "Enter a valid email address." },
      {
        auth: { signup: "open" },
        fields: { email: "new@example.com", password: "short" },
        code: "password",
        message: "The password must be 8 to 256 characters.",
      },
      {
        auth: { signup: "open" },
        fields: { email: "ANN@example.com", password: PASSWORD },
        code: "email_taken",
        message: "An account with this email already exists.",
      },
      {
        auth: { signup: "domain", allowed_domains: ["corp.example"] },
        fields: { email: "new@example.com", password: PASSWORD },
        code: "signup_domain",
        message: "Sign-up is limited to addresses at corp.example.",
      },
    ];
    for (const c of cases) {
      const pages = withPages({ auth: c.auth });
      await t.user("ann@example.com", { password: PASSWORD });
      const refused = await pages.post("/auth/signup", c.fields);
      expect(refused.status).toBe(303);
      expect(refused.headers.get("location")).toBe(`/dashboard/signup?error=${c.code}`);
      const html = await (await pages.get(refused.headers.get("location")!)).text();
      expect(html).toContain(c.message);
      expect(html).not.toContain(c.fields.password);
      expect(t.deps.db.$client.query("SELECT count(*) AS n FROM users").get()).toEqual({ n: 1 });
    }
  });

  test("success signs in and goes to the safe next", async () => {
    const pages = withPages({ auth: { signup: "open" } });
    const created = await pages.post("/auth/signup", { email: "new@example.com", password: PASSWORD, next: "/dashboard/playground" });
    expect(created.status).toBe(303);
    expect(created.headers.get("location")).toBe("/dashboard/playground");
    expect(created.headers.get("set-cookie")).toStartWith("mg_session=");
  });
});

describe("first-run setup page", () => {
  test("is the dashboard's layout; refusals come back to it; a dead link never shows a token", async () => {
    const pages = withPages();
    const token = new URL((await issueSetupLink(t.deps.db, { now: t.clock.now, publicUrl: "http://localhost:8080" }))!).searchParams.get("token")!;
    const page = await pages.get(`/setup?token=${token}`);
    expect(page.status).toBe(200);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const html = await page.text();
    expect(html).toContain('<a class="brand" href="/dashboard">modelgate</a>');
    expect(html).toContain("<h1>Set up modelgate</h1>");
    expect(html).toContain('<label for="password">Password');
    expect(alertOf(html)).toBeNull();
    const refused = await pages.post("/setup", { token, email: "nope", password: PASSWORD });
    expect(refused.headers.get("location")).toBe(`/setup?token=${token}&error=email`);
    expect(alertOf(await (await pages.get(refused.headers.get("location")!)).text())).toBe("Enter a valid email address.");
    const guessed = "a".repeat(32);
    const dead = await pages.post("/setup", { token: guessed, email: "root@example.com", password: PASSWORD });
    expect(dead.headers.get("location")).toBe("/setup?error=setup_invalid");
    const deadPage = await pages.get(`/setup?token=${guessed}&error=email`);
    expect(deadPage.status).toBe(404);
    const deadHtml = await deadPage.text();
    expect(deadHtml).toContain("This setup link is invalid, expired or already used.");
    expect(deadHtml).not.toContain(guessed);
    expect(t.deps.db.$client.query("SELECT count(*) AS n FROM users").get()).toEqual({ n: 0 });
  });
});

describe("the sign-in routes in the OpenAPI document", () => {
  test("each declares its responses, and the form routes their fields (Swagger UI can send and show them)", async () => {
    const pages = withPages();
    const doc = (await (await pages.get("/swagger/json")).json()) as { paths: Record<string, Record<string, { responses?: object; requestBody?: any }>> };
    for (const path of [
      "/auth/providers",
      "/auth/me",
      "/auth/signup",
      "/auth/login",
      "/auth/logout",
      "/setup",
      "/api/admin/credits",
      "/auth/github/callback",
    ]) {
      for (const operation of Object.values(doc.paths[path])) expect(Object.keys(operation.responses ?? {}).length).toBeGreaterThan(0);
    }
    const login = doc.paths["/auth/login"].post.requestBody.content["application/x-www-form-urlencoded"].schema;
    expect(login.required).toEqual(["email", "password"]);
    // A JSON caller of an OAuth callback gets errors, not only the browser's 303.
    expect(Object.keys(doc.paths["/auth/github/callback"].get.responses!).sort()).toEqual(["303", "400", "403", "502"]);
    // The dashboard's pages stay out of it.
    expect(Object.keys(doc.paths).some((path) => path.startsWith("/dashboard"))).toBe(false);
  });
});
