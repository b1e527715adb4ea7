// The Alerts page in process: alert groups with their summary, status and each target's delivery
// state; admins only; a dead delivery's Retry makes it pending again (CSRF-checked like every form).
import { expect, test } from "bun:test";
import { buildTestApp } from "../support/app";
import { createApp } from "../../src/app";
import { dashboardRoutes } from "../../src/dashboard";
import { csrfToken } from "../../src/dashboard/csrf";
import { createUser, type User } from "../../src/auth/users";
import { createSession } from "../../src/auth/session";
import { addDeliveries, deliveriesOf, markFailed, markSent } from "../../src/webhooks/triage/delivery-rows";
import { insertAlert, setSummary } from "../../src/webhooks/triage/store";

const NOW = Date.UTC(2026, 10, 28, 7, 0, 0);
const ORIGIN = "http://localhost";

test("admins see each alert's summary, status and deliveries, and retry a dead one", async () => {
  const t = buildTestApp({}, { now: () => NOW });
  const app = createApp(t.deps, [dashboardRoutes(t.deps)]);
  const db = t.deps.db;
  const alert = await insertAlert(db, {
    call_id: 1,
    job_id: 1,
    path: "/hooks/am",
    kind: "alertmanager",
    status: "firing",
    group_key: "g",
    dedupe_key: "d",
    title: "DiskFull <db-1>",
    severity: "critical",
    details: "",
    alert_count: 1,
    state: "triaging",
    refers_to: null,
    digest_id: null,
    created_at: NOW,
    due_at: null,
  });
  await setSummary(db, alert.id, { summary: "Disk is filling on db-1." });
  await addDeliveries(db, alert.id, ["slack", "ntfy"], NOW);
  await markSent(db, { alert_id: alert.id, target: 0 }, NOW, null);
  await markFailed(db, { alert_id: alert.id, target: 1 }, "ntfy: HTTP 404 from https://ntfy.example/<redacted>", null);
  const session = async (email: string, isAdmin: boolean) => {
    const user = (await createUser(t.deps.db, { email, password: "correct horse", isAdmin })) as User;
    const { token } = await createSession(t.deps.db, { userId: user.id, now: NOW, durationMs: 86_400_000 });
    return { cookie: `mg_session=${token}`, csrf: csrfToken(token) };
  };
  const admin = await session("admin@example.com", true);
  const bob = await session("bob@example.com", false);
  const get = (cookie: string) => app.handle(new Request(`${ORIGIN}/dashboard/alerts`, { headers: { cookie } }));
  const retry = (cookie: string, csrf: string) =>
    app.handle(
      new Request(`${ORIGIN}/dashboard/alerts/${alert.id}/retry`, {
        method: "POST",
        headers: { cookie, origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ csrf }).toString(),
      }),
    );

  expect((await get(bob.cookie)).status).toBe(403);
  const page = await (await get(admin.cookie)).text();
  expect(page).toContain("DiskFull &lt;db-1&gt;");
  expect(page).toContain("Disk is filling on db-1.");
  expect(page).toContain("slack sent");
  expect(page).toContain("ntfy dead");
  expect(page).toContain("HTTP 404");
  expect(page).toContain(`action="/dashboard/alerts/${alert.id}/retry"`);

  expect((await retry(bob.cookie, bob.csrf)).status).toBe(403);
  expect((await retry(admin.cookie, "wrong")).status).toBe(403);
  expect((await deliveriesOf(db, [alert.id]))[1].state).toBe("dead");
  const done = await retry(admin.cookie, admin.csrf);
  expect(done.status).toBe(303);
  expect((await deliveriesOf(db, [alert.id])).map((d) => [d.state, d.attempts])).toEqual([
    ["sent", 1],
    ["pending", 0],
  ]);
  expect((await retry(admin.cookie, admin.csrf)).status).toBe(404);
});
