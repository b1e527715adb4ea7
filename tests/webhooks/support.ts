/**
 * An in-process webhook gateway over a real SQLite file in a fresh temporary directory (or a
 * Postgres handle the test opened), with an injected clock. Requests go through `gateway.fetch`, the same handler Bun.serve runs.
 */
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildConfig } from "../../src/config/load";
import type { Config } from "../../src/config/schema";
import { openDatabase, type Db } from "../../src/db/client";
import { WebhookGateway } from "../../src/webhooks/gateway";
import { outboxFor } from "../../src/webhooks";
import { secretRedactor } from "../../src/webhooks/redact";
import type { Outbox } from "../../src/webhooks/outbox";

interface TestClock {
  now: () => number;
  advance(ms: number): void;
}

function testClock(start = 1_800_000_000_000): TestClock {
  let t = start;
  return { now: () => t, advance: (ms) => void (t += ms) };
}

export interface TestGateway {
  config: Config;
  gateway: WebhookGateway;
  outbox: Outbox;
  clock: TestClock;
  dir: string;
  /** The main connection (migrated), as the CLI would open it; on Postgres the handle given. */
  main: { db: Db; close(): void };
  post(path: string, body: string | Uint8Array, headers?: Record<string, string>): Promise<Response>;
  request(path: string, init?: RequestInit): Promise<Response>;
  close(): void;
}

export function buildTestGateway(
  webhooks: Record<string, unknown>,
  options: { jobs?: unknown[]; serviceId?: number; env?: Record<string, string>; realClock?: true; db?: Db } = {},
): TestGateway {
  const dir = mkdtempSync(join(tmpdir(), "modelgate-webhooks-"));
  const raw: Record<string, unknown> = { server: { data_dir: dir }, webhooks: { enabled: true, ...webhooks } };
  if (options.jobs) raw.jobs = options.jobs;
  const { config, secretValues } = buildConfig(raw, { env: options.env ?? {}, baseDir: dir });
  const main = options.db ? { db: options.db, close: () => {} } : openDatabase(dir);
  const clock = testClock();
  const outbox = outboxFor(config, options.db ?? join(dir, "modelgate.db"), {
    now: options.realClock ? Date.now : clock.now,
    random: options.realClock ? undefined : () => 0,
    redact: secretRedactor(secretValues),
  });
  const gateway = new WebhookGateway({ config: config.webhooks, outbox, serviceId: options.serviceId ?? 42 });
  const request = (path: string, init?: RequestInit) => gateway.fetch(new Request(`http://localhost${path}`, init));
  return {
    config,
    gateway,
    outbox,
    clock,
    dir,
    main,
    request,
    post: (path, body, headers = {}) => request(path, { method: "POST", body, headers }),
    close: () => {
      void outbox.close();
      main.close();
    },
  };
}
