/**
 * The rate-limit headers of a 429 as a client of the compiled binary meets them, and how they
 * relate. The headers keep OpenAI's meanings: `x-ratelimit-reset-requests` is the time until the
 * limit is back to its initial state (the bucket full again: every request of the minute), and
 * `Retry-After` the time until one more request is allowed. After a burst that empties a bucket of
 * 10 per minute, one request comes back every 6 s: Retry-After says 6, the reset says 1m0s.
 */
import { afterAll, expect, test } from "bun:test";
import { createUserKey, startGateway, type RunningGateway } from "../support/binary";
import { startMockUpstream } from "../support/mock-upstream";

const mock = startMockUpstream();
let gateway: RunningGateway | undefined;
afterAll(async () => {
  await gateway?.stop();
  mock.stop();
});

test("a 429 says when one request is allowed again (Retry-After) and when all of them are (the reset)", async () => {
  gateway = await startGateway(
    `[limits]\napi_key = { per_minute = 10 }\n\n[[upstreams]]\nname = "mock"\nbase_url = "${mock.url}"\n\n[[models]]\nid = "free"\nfree = true\ntargets = [{ upstream = "mock", model = "mock-small" }]\n`,
  );
  const { key } = await createUserKey(gateway);
  const chat = (): Promise<Response> =>
    fetch(`${gateway!.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "free", messages: [{ role: "user", content: "hi" }] }),
    });
  const answers: Response[] = [];
  const bodies: string[] = [];
  for (let i = 0; i < 11; i++) {
    const answer = await chat();
    bodies.push(await answer.text());
    answers.push(answer);
  }
  const limits = (r: Response): Record<string, string | null> => ({
    status: String(r.status),
    remaining: r.headers.get("x-ratelimit-remaining-requests"),
    reset: r.headers.get("x-ratelimit-reset-requests"),
    retryAfter: r.headers.get("retry-after"),
  });
  // One request used: the bucket is full again once it has come back.
  expect(limits(answers[0])).toEqual({ status: "200", remaining: "9", reset: "6s", retryAfter: null });
  const refused = answers[10];
  // The bucket refills while the requests are made: on a slow machine a second may have passed.
  const { reset, retryAfter, ...rest } = limits(refused);
  expect(rest).toEqual({ status: "429", remaining: "0" });
  expect(["1m0s", "59s"]).toContain(reset!);
  expect(["6", "5"]).toContain(retryAfter!);
  const { error } = JSON.parse(bodies[10]) as { error: { code: string; message: string } };
  expect(error.code).toBe("rate_limit_exceeded");
  expect(error.message).toMatch(/10 requests per minute; retry after [56] s/);
});
