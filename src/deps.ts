/**
 * What the app is built from. `createApp(deps)` never opens files or sockets itself, so tests
 * build deps in memory (see tests/support/app.ts) and the server builds them from the config.
 */
import type { Config } from "./config/schema";
import type { Db } from "./db/client";
import type { Gate } from "./auth/types";
import type { RequestRecord } from "./requests/record";
import type { ModelRegistry } from "./router/registry";

export interface AppDeps {
  config: Config;
  db: Db;
  registry: ModelRegistry;
  gate: Gate;
  now: () => number;
  version: string;
  startedAt: number;
  /** One call per finished /v1 model request (request log, metrics). Must not block. */
  onRequestDone: (record: RequestRecord) => void;
  /** Extra sections for /api/status contributed by optional parts (webhooks, settlements); a promise where one reads the database. */
  statusSections: Array<() => Record<string, unknown> | Promise<Record<string, unknown>>>;
}
