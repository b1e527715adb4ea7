/**
 * What the app is built from. `createApp(deps)` never opens files or sockets itself, so tests
 * build deps in memory (see tests/support/app.ts) and the server builds them from the config.
 */
import type { Config, EndpointName } from "./config/schema";
import type { Db } from "./db/client";
import type { Gate, IdentityKind } from "./auth/types";
import type { ModelRegistry } from "./router/registry";

export interface RequestRecord {
  requestId: string;
  createdAt: number;
  identity: IdentityKind;
  userId: number | null;
  keyId: string | null;
  model: string;
  /** The endpoint called ("" for a request refused before its endpoint was known). */
  endpoint: EndpointName | "";
  upstream: string | null;
  status: number;
  promptTokens: number;
  completionTokens: number;
  costMicro: number;
  latencyMs: number;
  upstreamMs: number;
}

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
