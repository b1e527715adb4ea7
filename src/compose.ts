/**
 * The one place AppDeps are assembled from a config: the model registry, the gateway metrics,
 * the gate, and where finished requests go. `serve` (through ./generation.ts, once per config it
 * loads) and the tests' app builder (tests/support/app.ts) both call it, injecting the database
 * and the clock, so the app a test exercises is put together as the server's is. Nothing in the
 * deps changes once built: a reload builds new ones.
 */
import type { Config } from "./config/schema";
import type { Db } from "./db/client";
import type { AppDeps } from "./deps";
import type { RequestRecord } from "./requests/record";
import { openGate, type Gate } from "./auth/types";
import { ModelRegistry } from "./router/registry";
import { createGatewayMetrics, type GatewayMetrics } from "./metrics/gateway";

export interface ComposeOptions {
  db: Db;
  /** The clock every part reads (Date.now in the server; a hand-moved one in tests). */
  now: () => number;
  version: string;
  /** Process start, epoch ms (uptime in /api/status and /metrics). */
  startedAt: number;
  /** The source of randomness for choosing between targets; Math.random when absent. */
  random?: () => number;
  /** Who may call; absent, every caller is let through as anonymous (no identities configured in). */
  gate?: Gate;
  /** Where each finished model request goes, given the metrics it may feed. */
  requestDone: (metrics: GatewayMetrics) => (record: RequestRecord) => void;
  /** Handed to the metrics: called before /metrics renders (flushes queued observations). */
  beforeMetricsRender?: () => void;
  statusSections?: AppDeps["statusSections"];
  /** Metrics that outlive this composition (a reloading server's); made here, over this registry, when absent. */
  metrics?: GatewayMetrics;
  /** The registry of the config this one replaces: what its unchanged upstreams learnt carries over. */
  previous?: ModelRegistry;
}

export interface Composition {
  deps: AppDeps;
  metrics: GatewayMetrics;
}

export function buildDeps(config: Config, options: ComposeOptions): Composition {
  const registry = new ModelRegistry(config, { random: options.random, previous: options.previous });
  const metrics =
    options.metrics ??
    createGatewayMetrics({
      registry: () => registry,
      version: options.version,
      startedAt: options.startedAt,
      now: options.now,
      beforeRender: options.beforeMetricsRender,
    });
  const deps: AppDeps = {
    config,
    db: options.db,
    registry,
    gate: options.gate ?? openGate,
    now: options.now,
    version: options.version,
    startedAt: options.startedAt,
    onRequestDone: options.requestDone(metrics),
    statusSections: options.statusSections ?? [],
  };
  return { deps, metrics };
}
