/**
 * The request sink: finished requests are queued, and each batch is counted into the metrics,
 * logged and inserted, in that order, off the request path.
 */
import { captureLog } from "../support/log";
import { describe, expect, test } from "bun:test";
import { createRequestSink, FULL_BATCH } from "../../src/requests/sink";
import { createGatewayMetrics } from "../../src/metrics/gateway";
import { ModelRegistry } from "../../src/router/registry";
import { buildConfig } from "../../src/config/load";
import type { RequestRecord } from "../../src/requests/record";

const record = (i: number): RequestRecord => ({
  requestId: `req_${i}`,
  createdAt: 0,
  identity: "anonymous",
  userId: null,
  keyId: null,
  model: "m",
  endpoint: "chat",
  upstream: "u",
  status: 200,
  promptTokens: 1,
  completionTokens: 1,
  costMicro: 0,
  latencyMs: 1,
  upstreamMs: 1,
});

function recordingSink(insert: (records: RequestRecord[]) => void = () => {}) {
  const calls: string[] = [];
  const sink = createRequestSink({
    observe: (r) => void calls.push(`observe ${r.requestId}`),
    logLines: (batch) => void calls.push(`log ${batch.length}`),
    insert: (batch) => {
      calls.push(`insert ${batch.length}`);
      insert(batch);
    },
  });
  return { sink, calls };
}

describe("request sink", () => {
  test("nothing reaches the parts before a flush; then each part sees the batch, in order", () => {
    const { sink, calls } = recordingSink();
    sink.push(record(1));
    sink.push(record(2));
    expect(calls).toEqual([]);
    sink.flush();
    expect(calls).toEqual(["observe req_1", "observe req_2", "log 2", "insert 2"]);
    sink.close();
  });

  test("a full batch goes at once, without waiting for the interval", async () => {
    const { sink, calls } = recordingSink();
    for (let i = 0; i < FULL_BATCH - 1; i++) sink.push(record(i));
    await Promise.resolve();
    expect(calls).toEqual([]);
    sink.push(record(FULL_BATCH - 1));
    await Promise.resolve();
    expect(calls.filter((c) => !c.startsWith("observe"))).toEqual([`log ${FULL_BATCH}`, `insert ${FULL_BATCH}`]);
    sink.close();
  });

  test("a failed insert is kept and inserted with the next flush; its rows are counted and logged once", () => {
    const captured = captureLog();
    let fail = true;
    const { sink, calls } = recordingSink(() => {
      if (fail) throw new Error("database is locked");
    });
    sink.push(record(1));
    sink.flush();
    fail = false;
    sink.push(record(2));
    sink.close();
    expect(calls).toEqual(["observe req_1", "log 1", "insert 1", "observe req_2", "log 1", "insert 2"]);
    expect(captured.lines()[0]).toContain("request log: write failed, 1 row(s) kept to retry");
    expect(captured.lines()[1]).toContain("request log: written again after 1 failed attempt(s)");
    captured.restore();
  });

  test("a metrics scrape includes requests still queued", () => {
    const { config } = buildConfig(
      { upstreams: [{ name: "u", base_url: "http://127.0.0.1:1/v1" }], models: [{ id: "m", targets: [{ upstream: "u" }] }] },
      { env: {} },
    );
    const registry = new ModelRegistry(config);
    let sink: ReturnType<typeof createRequestSink> | null = null;
    const metrics = createGatewayMetrics({ registry: () => registry, version: "t", startedAt: 0, now: Date.now, beforeRender: () => sink!.flush() });
    sink = createRequestSink({ observe: metrics.observe, logLines: () => {}, insert: () => {} });
    sink.push(record(1));
    sink.push({ ...record(2), status: 429, upstream: null });
    expect(metrics.render()).toContain('modelgate_requests_total{model="m",endpoint="chat",upstream="u",identity="anonymous",status="200"} 1');
    expect(metrics.requests.get(["m", "chat", "", "anonymous", "429"])).toBe(1);
    sink.close();
  });
});
