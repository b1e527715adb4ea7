/**
 * Builds the app in process over an in-memory database, for fast tests through `app.handle`.
 * Deps come from `buildDeps` (src/compose.ts), the function `serve` builds them with; the other
 * in-process builders (tests/auth/support.ts, tests/router/helpers.ts) are made on `composeTestApp`.
 */
import type { Elysia } from "elysia";
import { buildConfig } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import { openDatabase, type Db } from "../../src/db/client";
import { createApp } from "../../src/app";
import { buildDeps } from "../../src/compose";
import type { AppDeps } from "../../src/deps";
import type { RequestRecord } from "../../src/requests/record";
import type { Gate } from "../../src/auth/types";
import type { Identities } from "../../src/auth/identities";
import type { GatewayMetrics } from "../../src/metrics/gateway";

export interface TestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDeps;
  records: RequestRecord[];
  request(path: string, init?: RequestInit): Promise<Response>;
  chat(body: unknown, headers?: Record<string, string>): Promise<Response>;
}

export interface ComposeTestOptions {
  now?: () => number;
  random?: () => number;
  /** Who may call when there are no identities; every caller when absent. */
  gate?: Gate;
  /** The real identities, built over the config and database: their gate, their routes first. */
  identities?: (parts: { config: Config; db: Db; now: () => number }) => Identities;
  /** Finished requests are kept in `records`; with this, they also feed the gateway metrics. */
  observeMetrics?: "yes";
  /** Controllers mounted beside the core routes. */
  features?: (parts: { deps: AppDeps; metrics: GatewayMetrics }) => Elysia<any, any, any, any, any, any, any>[];
  overrides?: Partial<AppDeps>;
}

export interface ComposedTestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDeps;
  metrics: GatewayMetrics;
  records: RequestRecord[];
  identities: Identities | null;
  closeDb(): void;
}

/** Config from `raw` (no environment), an in-memory database, and deps as `serve` builds them. */
export function composeTestApp(raw: Record<string, unknown>, options: ComposeTestOptions = {}): ComposedTestApp {
  const { config } = buildConfig(raw, { env: {} });
  const { db, close } = openDatabase(":memory:");
  const now = options.now ?? Date.now;
  const records: RequestRecord[] = [];
  const identities = options.identities?.({ config, db, now }) ?? null;
  const composed = buildDeps(config, {
    db,
    now,
    version: "test",
    startedAt: now(),
    random: options.random,
    gate: identities?.gate ?? options.gate,
    requestDone: (metrics) =>
      options.observeMetrics === "yes"
        ? (r) => {
            records.push(r);
            metrics.observe(r);
          }
        : (r) => {
            records.push(r);
          },
  });
  const deps: AppDeps = { ...composed.deps, ...options.overrides };
  const features = options.features?.({ deps, metrics: composed.metrics }) ?? [];
  const app = createApp(deps, identities ? [identities.routes, ...features] : features);
  return { app, deps, metrics: composed.metrics, records, identities, closeDb: close };
}

export function buildTestApp(raw: Record<string, unknown> = {}, overrides: Partial<AppDeps> = {}): TestApp {
  const { app, deps, records } = composeTestApp(raw, { overrides });
  const request = (path: string, init?: RequestInit) => app.handle(new Request(`http://localhost${path}`, init));
  return {
    app,
    deps,
    records,
    request,
    chat: (body, headers = {}) =>
      request("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
  };
}
