/**
 * In-process gateway for routing tests: the real app (deps from composeTestApp) with the /metrics
 * controller, over an in-memory database, with an injectable clock and random source; plus a
 * small parser of the Prometheus text format and an SSE reader.
 */
import { afterEach } from "bun:test";
import type { AppDeps } from "../../src/deps";
import type { RequestRecord } from "../../src/requests/record";
import type { Gate } from "../../src/auth/types";
import type { GatewayMetrics } from "../../src/metrics/gateway";
import { metricsRoutes } from "../../src/metrics/routes";
import { composeTestApp } from "../support/app";
import { startMockUpstream, type MockBehaviour, type MockUpstream } from "../support/mock-upstream";

/** A starter of mock upstreams for one test file; every one started is stopped after each test. */
export function mockUpstreams(): (behaviour?: MockBehaviour) => MockUpstream {
  const started: MockUpstream[] = [];
  afterEach(() => {
    while (started.length) started.pop()!.stop();
  });
  return (behaviour = {}) => {
    const upstream = startMockUpstream(behaviour);
    started.push(upstream);
    return upstream;
  };
}

export interface RouterApp {
  deps: AppDeps;
  metrics: GatewayMetrics;
  records: RequestRecord[];
  request(path: string, init?: RequestInit): Promise<Response>;
  chat(body: Record<string, unknown>, headers?: Record<string, string>): Promise<Response>;
  fetch: (input: string | URL | Request, init?: RequestInit) => Promise<Response>;
}

export function routerApp(raw: Record<string, unknown>, options: { now?: () => number; random?: () => number; gate?: Gate } = {}): RouterApp {
  const { app, deps, metrics, records } = composeTestApp(raw, {
    now: options.now,
    random: options.random,
    gate: options.gate,
    observeMetrics: "yes",
    features: ({ deps, metrics }) => [metricsRoutes(deps.config.metrics, metrics)],
  });
  const fetch = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    app.handle(input instanceof Request ? input : new Request(String(input), init));
  const request = (path: string, init?: RequestInit): Promise<Response> => fetch(`http://localhost${path}`, init);
  return {
    deps,
    metrics,
    records,
    request,
    fetch,
    chat: (body, headers = {}) =>
      request("/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) }),
  };
}

/** A response's JSON body, untyped (tests assert on its shape). */
export async function json(res: Response): Promise<any> {
  return await res.json();
}

export const HELLO = [{ role: "user", content: "hello" }];

/** `name{a="x",b="y"}` -> value, for every sample line of a Prometheus text exposition. */
export function parseMetrics(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    samples.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return samples;
}

/** The value of one sample, labels in any order; 0 when absent. */
export function sample(samples: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  for (const [key, value] of samples) {
    const brace = key.indexOf("{");
    const metric = brace === -1 ? key : key.slice(0, brace);
    if (metric !== name) continue;
    const body = brace === -1 ? "" : key.slice(brace + 1, -1);
    const have = Object.fromEntries([...body.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return value;
  }
  return 0;
}

/** The `data:` payloads of an SSE body, in order. */
export function sseData(text: string): string[] {
  return text
    .split("\n\n")
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6));
}

/** A seeded random source (mulberry32) so weighted-split tests are reproducible. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
