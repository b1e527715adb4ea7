/**
 * The shortcuts the hot path takes must give the same answers as the slow, obvious code: the
 * request log line written as a template, and usage read from the tail of a completion body.
 */
import { describe, expect, test } from "bun:test";
import { createLogger } from "../../src/log";
import { usageFromJson } from "../../src/credits/cost";
import type { RequestRecord } from "../../src/requests/record";

describe("request log line", () => {
  test("is valid JSON with config strings escaped, and nulls as null", () => {
    const writes: string[] = [];
    const logger = createLogger({ level: "info", requests: true, write: (text) => void writes.push(text) });
    const record: RequestRecord = {
      requestId: "req_1",
      createdAt: Date.UTC(2026, 0, 2),
      identity: "anonymous",
      userId: null,
      keyId: null,
      endpoint: "chat",
      model: 'we"ird\\model\n名前',
      upstream: null,
      status: 200,
      promptTokens: 1,
      completionTokens: 2,
      costMicro: 0,
      latencyMs: 1.234,
      upstreamMs: 1,
    };
    logger.requests([record, { ...record, requestId: "req_2", userId: 7, keyId: "key_abc", upstream: 'up"stream' }]);
    const lines = writes
      .join("")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines[0]).toEqual({
      time: "2026-01-02T00:00:00.000Z",
      level: "info",
      msg: "request",
      request_id: "req_1",
      identity: "anonymous",
      user_id: null,
      key_id: null,
      model: 'we"ird\\model\n名前',
      endpoint: "chat",
      upstream: null,
      status: 200,
      prompt_tokens: 1,
      completion_tokens: 2,
      cost_micro: 0,
      duration_ms: 1.23,
      upstream_ms: 1,
      overhead_ms: 0.23,
    });
    expect(lines[1]).toMatchObject({ request_id: "req_2", user_id: 7, key_id: "key_abc", upstream: 'up"stream' });
  });

  test("records of one millisecond share its time, and a new millisecond gets its own", () => {
    const writes: string[] = [];
    const logger = createLogger({ level: "info", requests: true, write: (text) => void writes.push(text) });
    const at = (createdAt: number, requestId: string): RequestRecord => ({
      requestId,
      createdAt,
      identity: "anonymous",
      userId: null,
      keyId: null,
      model: "m",
      endpoint: "chat",
      upstream: "u",
      status: 200,
      promptTokens: 0,
      completionTokens: 0,
      costMicro: 0,
      latencyMs: 1,
      upstreamMs: 1,
    });
    const t = Date.UTC(2026, 10, 22, 9, 30);
    logger.requests([at(t, "a"), at(t, "b"), at(t + 1, "c")]);
    logger.requests([at(t, "d")]);
    const times = writes
      .join("")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).time);
    expect(times).toEqual(["2026-11-22T09:30:00.000Z", "2026-11-22T09:30:00.000Z", "2026-11-22T09:30:00.001Z", "2026-11-22T09:30:00.000Z"]);
  });
});

describe("usage from a completion body", () => {
  const cases: Array<[string, unknown]> = [
    ["flat usage last", { id: "x", choices: [], usage: { prompt_tokens: 8, completion_tokens: 6, total_tokens: 14 } }],
    ["nested details (OpenAI)", { usage: { prompt_tokens: 3, completion_tokens: 4, prompt_tokens_details: { cached_tokens: 1 } }, id: "y" }],
    ["usage before other keys", { usage: { prompt_tokens: 5, completion_tokens: 1 }, system_fingerprint: "fp", x: { a: 1 } }],
    ["usage null followed by an object", { usage: null, extra: { prompt_tokens: 99 } }],
    [
      '"usage" inside the answer text',
      { choices: [{ message: { content: 'the "usage": {"prompt_tokens": 1} field' } }], usage: { prompt_tokens: 2, completion_tokens: 3 } },
    ],
    ["no usage", { choices: [{ message: { content: "hi" } }] }],
  ];
  for (const [name, body] of cases) {
    test(name, () => {
      const text = JSON.stringify(body);
      // The counts of the body's own usage object, found wherever it sits (other keys dropped).
      const usage = (body as { usage?: { prompt_tokens?: number; completion_tokens?: number } | null }).usage;
      const expected = usage ? { prompt_tokens: usage.prompt_tokens ?? 0, completion_tokens: usage.completion_tokens ?? 0 } : null;
      expect(usageFromJson(text)).toEqual(expected);
    });
  }

  test("a body that is not JSON has no usage", () => {
    expect(usageFromJson('{"usage": {"prompt_tokens": 1')).toBeNull();
    expect(usageFromJson("<html>502</html>")).toBeNull();
  });
});
