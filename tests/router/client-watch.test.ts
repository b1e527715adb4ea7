/**
 * First-byte deadlines (src/router/client-watch.ts): attempts with the same timeout share one
 * queue and one timer, so these check that every attempt still times out on its own deadline,
 * never before it, that an answered attempt never times out, and that queues re-arm after
 * draining. (Client departure is tested against the binary in client-departure.test.ts.)
 */
import { expect, test } from "bun:test";
import { watchClient, type ClientWatch } from "../../src/router/client-watch";

interface Attempt {
  name: string;
  watch: ClientWatch;
  startedAt: number;
  ms: number;
}

function start(name: string, ms: number, fired: Array<{ name: string; reason: string; late: number }>): Attempt {
  const watch = watchClient(new Request("http://localhost/"));
  const attempt = { name, watch, startedAt: performance.now(), ms };
  watch.onGone = (reason) => fired.push({ name, reason, late: performance.now() - attempt.startedAt - ms });
  watch.answerWithin(ms);
  return attempt;
}

test("each attempt times out at its own deadline, never before; answered ones never", async () => {
  const fired: Array<{ name: string; reason: string; late: number }> = [];
  // Deadlines far enough apart that a loaded machine's late timers cannot reorder them.
  const a = start("a", 200, fired);
  await Bun.sleep(30);
  const b = start("b", 200, fired);
  const answered = start("answered", 200, fired);
  const short = start("short", 20, fired); // another timeout: its own queue, fires first
  answered.watch.answered();
  await Bun.sleep(350);
  expect(fired.map((f) => f.name)).toEqual(["short", "a", "b"]);
  for (const f of fired) {
    expect(f.reason).toBe("timeout");
    expect(f.late).toBeGreaterThanOrEqual(-1); // the timer's own rounding, at most
  }
  expect([a, b, short].map((x) => x.watch.timedOut)).toEqual([true, true, true]);
  expect(answered.watch.timedOut).toBe(false);

  // The queues are empty now; a new attempt arms them again.
  const again = start("again", 20, fired);
  await Bun.sleep(60);
  expect(fired.at(-1)?.name).toBe("again");
  expect(again.watch.timedOut).toBe(true);
  for (const x of [a, b, answered, short, again]) x.watch.done();
});

test("a new attempt on the same watch starts a fresh deadline and clears timedOut", async () => {
  const fired: Array<{ name: string; reason: string; late: number }> = [];
  const first = start("first", 20, fired);
  await Bun.sleep(50);
  expect(first.watch.timedOut).toBe(true);
  first.watch.answerWithin(1_000);
  expect(first.watch.timedOut).toBe(false);
  await Bun.sleep(30);
  expect(fired).toHaveLength(1);
  first.watch.done();
  await Bun.sleep(5);
  expect(first.watch.timedOut).toBe(false);
});
