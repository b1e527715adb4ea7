/**
 * Builds the app in process over an in-memory database, for fast tests through `app.handle`.
 */
import { buildConfig } from "../../src/config/load";
import { openDatabase } from "../../src/db/client";
import { createApp } from "../../src/app";
import type { AppDeps, RequestRecord } from "../../src/deps";
import { openGate } from "../../src/auth/types";
import { ModelRegistry } from "../../src/router/registry";

export interface TestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDeps;
  records: RequestRecord[];
  request(path: string, init?: RequestInit): Promise<Response>;
  chat(body: unknown, headers?: Record<string, string>): Promise<Response>;
}

export function buildTestApp(raw: Record<string, unknown> = {}, overrides: Partial<AppDeps> = {}): TestApp {
  const { config } = buildConfig(raw, { env: {} });
  const { db } = openDatabase(":memory:");
  const records: RequestRecord[] = [];
  const deps: AppDeps = {
    config,
    db,
    registry: new ModelRegistry(config),
    gate: openGate,
    now: Date.now,
    version: "test",
    startedAt: Date.now(),
    onRequestDone: (r) => records.push(r),
    statusSections: [],
    ...overrides,
  };
  const app = createApp(deps);
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
