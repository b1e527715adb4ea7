/**
 * Start-up order does not matter, against the compiled binary: a gateway started before its
 * upstream finds the upstream's models soon after it comes up (discovery retries from 1 s, not
 * after a whole discover_interval_s), and a restarted gateway serves the routes it discovered
 * before, at once, while the upstream is down; the upstream's next list replaces them.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";
import { eventually } from "../support/eventually";

const running: Array<RunningGateway | MockUpstream> = [];
afterEach(async () => {
  for (const part of running.splice(0)) "proc" in part ? await part.stop() : part.stop();
});

async function modelIds(gateway: RunningGateway): Promise<string[]> {
  const body = (await (await fetch(`${gateway.url}/v1/models`)).json()) as { data: Array<{ id: string; source: string }> };
  return body.data
    .filter((m) => m.source === "discovered")
    .map((m) => m.id)
    .sort();
}

test("a gateway started before its upstream serves the upstream's models soon after it comes up, and remembers them across restarts", async () => {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-remembered-"));
  const upstreamPort = freePort();
  // An interval far longer than the test: only the quick retries while the upstream is down can find it.
  const config = `[[upstreams]]\nname = "later"\nbase_url = "http://127.0.0.1:${upstreamPort}/v1"\ndiscover = true\ndiscover_free = true\ndiscover_interval_s = 3600\n`;
  const first = await startGateway(config, { dir });
  running.push(first);
  expect(await modelIds(first)).toEqual([]);

  const upstream = startMockUpstream({ models: ["m1", "m2"] }, upstreamPort);
  running.push(upstream);
  expect(await eventually(async () => (await modelIds(first)).length === 2, 20_000, 100)).toBe(true);
  expect(await modelIds(first)).toEqual(["m1", "m2"]);
  const answer = await fetch(`${first.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m1", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(answer.status).toBe(200);
  expect(await first.stop()).toBe(0);
  running.splice(running.indexOf(first), 1);
  upstream.stop();
  running.splice(running.indexOf(upstream), 1);

  // The upstream is down: the routes are served from the database at once, before any discovery.
  const second = await startGateway(config, { dir });
  running.push(second);
  expect(await modelIds(second)).toEqual(["m1", "m2"]);
  expect(second.output()).toContain('serving 2 remembered route(s) of upstream \\"later\\"');

  // The upstream comes back listing another set: a model it dropped is gone, a new one is there.
  const changed = startMockUpstream({ models: ["m2", "m3"] }, upstreamPort);
  running.push(changed);
  expect(await eventually(async () => (await modelIds(second)).includes("m3"), 20_000, 100)).toBe(true);
  expect(await modelIds(second)).toEqual(["m2", "m3"]);
  expect(await second.stop()).toBe(0);
  running.splice(running.indexOf(second), 1);
  changed.stop();
  running.splice(running.indexOf(changed), 1);

  const third = await startGateway(config, { dir });
  running.push(third);
  expect(await modelIds(third)).toEqual(["m2", "m3"]);
}, 90_000);
