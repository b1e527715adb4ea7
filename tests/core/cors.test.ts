/**
 * CORS for the API (src/cors.ts), in process: off by default; with server.cors_origins, the
 * preflight and the answers (errors too) of /v1 and /api/health|status carry the headers for a
 * listed origin only, never Allow-Credentials, and never on the dashboard or sign-in routes.
 * tests/e2e/cors-browser.test.ts runs a page of another origin in a real browser.
 */
import { describe, expect, test } from "bun:test";
import { buildTestApp } from "../support/app";
import { buildConfig } from "../../src/config/load";

const PAGE = "https://chat.example.com";
const PREFLIGHT = {
  method: "OPTIONS",
  headers: { origin: PAGE, "access-control-request-method": "POST", "access-control-request-headers": "authorization, content-type, x-stainless-os" },
};

describe("CORS", () => {
  test("off by default: no CORS header on any answer, and a preflight is a 404", async () => {
    const t = buildTestApp();
    const res = await t.request("/v1/models", { headers: { origin: PAGE } });
    expect(res.status).toBe(200);
    expect([...res.headers.keys()].filter((name) => name.startsWith("access-control-"))).toEqual([]);
    expect((await t.request("/v1/chat/completions", PREFLIGHT)).status).toBe(404);
  });

  test("a listed origin: the preflight allows it and the headers it asked for; answers and errors carry it, and what a page may read", async () => {
    const t = buildTestApp({ server: { cors_origins: [PAGE, "http://localhost:3000"] } });
    const preflight = await t.request("/v1/chat/completions", PREFLIGHT);
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/); // every answer has one (regression: preflights had none)
    expect(Object.fromEntries([...preflight.headers].filter(([name]) => name.startsWith("access-control-")))).toEqual({
      "access-control-allow-origin": PAGE,
      "access-control-allow-methods": "GET, POST, OPTIONS",
      "access-control-allow-headers": "authorization, content-type, x-stainless-os",
      "access-control-max-age": "600",
    });
    const asked = [
      await t.request("/v1/models", { headers: { origin: PAGE } }),
      await t.request("/api/health", { headers: { origin: PAGE } }),
      await t.request("/v1/nope", { headers: { origin: PAGE } }),
      await t.request("/v1/chat/completions", { method: "POST", headers: { origin: PAGE, "content-type": "application/json" }, body: "{}" }),
    ];
    expect(asked.map((r) => r.status)).toEqual([200, 200, 404, 400]);
    for (const res of asked) {
      expect(res.headers.get("access-control-allow-origin")).toBe(PAGE);
      expect(res.headers.get("access-control-expose-headers")).toContain("x-ratelimit-remaining-requests");
      // Every header a SpendAuth 402 carries, the amount to sign first (regression: only the -* ones were listed).
      const exposed = res.headers.get("access-control-expose-headers")!.split(", ");
      for (const name of [
        "x-payment-required",
        "x-payment-required-operator",
        "x-payment-required-service-id",
        "x-payment-required-chain-id",
        "x-payment-required-contract",
      ])
        expect(exposed).toContain(name);
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
      expect(res.headers.get("vary")).toContain("origin");
    }
  });

  test("an origin not listed gets no CORS header; a malformed header list in a preflight gets the fixed one", async () => {
    const t = buildTestApp({ server: { cors_origins: [PAGE] } });
    const other = await t.request("/v1/models", { headers: { origin: "https://evil.example" } });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
    const preflight = await t.request("/v1/chat/completions", { method: "OPTIONS", headers: { origin: "https://evil.example" } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    expect(preflight.headers.get("x-request-id")).toMatch(/^req_/);
    const odd = await t.request("/v1/chat/completions", {
      method: "OPTIONS",
      headers: { origin: PAGE, "access-control-request-headers": "authorization, (x)" },
    });
    expect(odd.headers.get("access-control-allow-headers")).toBe("authorization, content-type, x-payment-signature");
  });

  test('"*" allows every origin, still without credentials; sign-in and admin routes never get CORS headers', async () => {
    const t = buildTestApp({ server: { cors_origins: ["*"] } });
    const res = await t.request("/v1/models", { headers: { origin: "https://anywhere.example" } });
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    // Without an Origin too: a shared cache cannot hand a browser a copy made without it (regression: no Vary, no header).
    expect((await t.request("/v1/models")).headers.get("access-control-allow-origin")).toBe("*");
    for (const path of ["/auth/login", "/api/admin/credits", "/dashboard/keys", "/swagger"]) {
      const answer = await t.request(path, { headers: { origin: "https://anywhere.example" } });
      expect({ path, allow: answer.headers.get("access-control-allow-origin") }).toEqual({ path, allow: null });
    }
  });

  test("a browser's chat request for a page of another origin is refused unless its origin is listed; requests with no Origin (SDKs, curl) and the gateway's own pages are not", async () => {
    const ask = (t: ReturnType<typeof buildTestApp>, headers: Record<string, string>) =>
      t.request("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "text/plain", ...headers },
        body: '{"model":"none","messages":[{"role":"user","content":"hi"}]}',
      });
    const off = buildTestApp({ server: { public_url: "https://gw.example.com" } });
    // Plain http to a LAN address: browsers send Origin but no Sec-Fetch-Site (regression: only Sec-Fetch-Site was read).
    const foreign: Array<Record<string, string>> = [{ origin: PAGE }, { origin: "null" }, { origin: PAGE, "sec-fetch-site": "cross-site" }];
    for (const headers of foreign) {
      const res = await ask(off, headers);
      expect(res.status).toBe(403);
      expect((await res.json()) as unknown).toMatchObject({ error: { code: "forbidden", type: "permission_error" } });
    }
    // Read and routed (a 404 for the unknown model), not refused:
    const allowed: Array<Record<string, string>> = [{}, { origin: "http://localhost" }, { origin: "https://gw.example.com" }];
    for (const headers of allowed) expect((await ask(off, headers)).status).toBe(404);
    const on = buildTestApp({ server: { cors_origins: [PAGE] } });
    expect((await ask(on, { origin: PAGE })).status).toBe(404);
    expect((await ask(on, { origin: "https://evil.example" })).status).toBe(403);
  });

  test('cors_origins takes origins or "*", and names a bad entry', () => {
    const build = (cors_origins: string[]) => buildConfig({ server: { cors_origins } }, { env: {} });
    expect(build(["https://chat.example.com", "http://localhost:3000", "*"]).config.server.cors_origins).toHaveLength(3);
    for (const bad of ["https://chat.example.com/", "chat.example.com", "https://Chat.example.com", "https://chat.example.com/app", "*.example.com"]) {
      expect(() => build([bad])).toThrow(`server.cors_origins[0]: "${bad}" is not an origin`);
    }
  });
});
