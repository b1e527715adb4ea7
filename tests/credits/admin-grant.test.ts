/**
 * POST /api/admin/credits, the dashboard's grant route: what it grants, and that every refusal
 * says what was wrong and changes no balance.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { getBalance, listLedger } from "../../src/credits/ledger";
import { buildAuthApp, jsonOf, type AuthTestApp } from "../auth/support";

let t: AuthTestApp;
afterEach(() => t?.close());

async function adminGrant(body: unknown): Promise<{ status: number; body: any }> {
  const admin = await t.user(`admin${Math.random()}@example.com`, { isAdmin: true });
  const response = await t.request("/api/admin/credits", {
    method: "POST",
    headers: { cookie: `mg_session=${await t.session(admin.id)}`, origin: "http://localhost", "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await jsonOf(response) };
}

describe("POST /api/admin/credits", () => {
  test("grants to the user named by email; the note is kept to 200 characters", async () => {
    t = buildAuthApp();
    const user = await t.user("payee@example.com");
    const granted = await adminGrant({ email: "Payee@Example.com", amount: "12.50", note: "x".repeat(500) });
    expect(granted).toEqual({ status: 200, body: { email: "payee@example.com", granted: "12.500000", balance: "12.500000" } });
    expect(await getBalance(t.deps.db, user.id)).toBe(12_500_000);
    expect((await listLedger(t.deps.db, { userId: user.id }))[0].note).toBe("x".repeat(200));
  });

  test("a grant that would take the balance past 9 billion credits: 400 naming amount, nothing written", async () => {
    t = buildAuthApp();
    const user = await t.user("payee@example.com");
    for (let i = 0; i < 9; i++) expect((await adminGrant({ email: "payee@example.com", amount: "1000000000" })).status).toBe(200);
    const refused = await adminGrant({ email: "payee@example.com", amount: "0.000001" });
    expect(refused.status).toBe(400);
    expect(refused.body.error.param).toBe("amount");
    expect(refused.body.error.message).toMatch(/past 9,000,000,000 credits/);
    expect(await getBalance(t.deps.db, user.id)).toBe(9e15);
    expect(await listLedger(t.deps.db, { userId: user.id })).toHaveLength(9);
  });

  const refusals: Array<[string, unknown, number, string, RegExp]> = [
    ["no email", { amount: "1" }, 400, "email", /email is required/],
    ["an email that is not a string", { email: ["payee@example.com"], amount: "1" }, 400, "email", /email is required/],
    ["an unknown email", { email: "nobody@example.com", amount: "1" }, 404, "email", /No user with the email "nobody@example.com"/],
    ["no amount", { email: "payee@example.com" }, 400, "amount", /positive number of credits/],
    ["a negative amount", { email: "payee@example.com", amount: -1 }, 400, "amount", /positive number of credits/],
    ["more than 6 decimals", { email: "payee@example.com", amount: 0.30000000000000004 }, 400, "amount", /at most 6 decimals/],
    ["an amount beyond any number", { email: "payee@example.com", amount: "1e400" }, 400, "amount", /positive number of credits/],
    ["a body that is a list", [], 400, "email", /email is required/],
  ];
  for (const [name, body, status, param, message] of refusals) {
    test(`${name}: ${status} naming ${param}, no balance changed`, async () => {
      t = buildAuthApp();
      const user = await t.user("payee@example.com");
      const refused = await adminGrant(body);
      expect(refused.status).toBe(status);
      expect(refused.body.error.param).toBe(param);
      expect(refused.body.error.message).toMatch(message);
      expect(await getBalance(t.deps.db, user.id)).toBe(0);
      expect(await listLedger(t.deps.db, { userId: user.id })).toHaveLength(0);
    });
  }
});
