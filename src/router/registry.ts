/**
 * The live set of model routes: those configured in `[[models]]` plus those imported by
 * `discover` from upstreams' own /v1/models. Configured routes always win over discovered ones
 * with the same id. Lookups are one Map read on the hot path.
 */
import { ENDPOINT_NAMES, type Config, type EndpointName, type ModelConfig, type UpstreamConfig } from "../config/schema";
import { closedCircuit, type Circuit } from "./circuit";
import { createUpstreamState, type UpstreamState } from "./upstream-setup";

type Strategy = ModelConfig["strategy"];

export interface Target {
  upstream: UpstreamState;
  /** The model name sent upstream. */
  model: string;
  weight: number;
  /** Opens when the upstream answers this model with 429 or 5xx (./target-state.ts). */
  circuit: Circuit;
  /** Moving average of this model's time to first byte there, ms (least-latency); null until answered. */
  ttfbEwmaMs: number | null;
}

export interface ModelRoute {
  id: string;
  free: boolean;
  /** Credits per 1M tokens (prompt, completion), and per call (request). */
  price: Price;
  /** The endpoints it serves (`endpoints` in config; every one for a discovered route). */
  endpoints: readonly EndpointName[];
  targets: Target[];
  strategy: Strategy;
  aliases: string[];
  source: "config" | "discovered";
  ownedBy: string;
}

interface Price {
  prompt: number;
  completion: number;
  request: number;
}

export interface RegistryOptions {
  /** The random source of the weighted strategy; Math.random when absent. */
  random?: () => number;
  /**
   * The registry this one replaces (a reload): upstreams whose settings are unchanged keep their
   * state, and a route's target on the same upstream and model keeps its circuit and latency.
   */
  previous?: ModelRegistry;
}

export class ModelRegistry {
  readonly upstreams = new Map<string, UpstreamState>();
  private configured = new Map<string, ModelRoute>();
  private discovered = new Map<string, Map<string, ModelRoute>>();
  private lookup = new Map<string, ModelRoute>();
  /** The random source of the weighted strategy (tests inject a seeded one). */
  readonly random: () => number;

  constructor(config: Pick<Config, "upstreams" | "models">, options: RegistryOptions = {}) {
    this.random = options.random ?? Math.random;
    const previous = options.previous;
    for (const u of config.upstreams) {
      // A reload keeps what an unchanged upstream has learnt (its circuit, counters, latency).
      const kept = previous?.upstreams.get(u.name);
      this.upstreams.set(u.name, kept !== undefined && Bun.deepEquals(kept.config, u) ? kept : createUpstreamState(u));
    }
    // In config order from the start: of two upstreams listing one id, the first written wins,
    // whichever poll comes back first.
    for (const u of config.upstreams) if (u.discover) this.discovered.set(u.name, new Map());
    for (const m of config.models) {
      const route: ModelRoute = {
        id: m.id,
        free: m.free,
        price: { prompt: m.price.prompt, completion: m.price.completion, request: m.price.request },
        endpoints: m.endpoints,
        targets: m.targets.map((t) => {
          const upstream = this.upstreams.get(t.upstream)!;
          const model = t.model ?? m.id;
          const kept = previous?.configured.get(m.id)?.targets.find((p) => p.upstream === upstream && p.model === model);
          return { upstream, model, weight: t.weight, circuit: kept?.circuit ?? closedCircuit(), ttfbEwmaMs: kept?.ttfbEwmaMs ?? null };
        }),
        strategy: m.strategy,
        aliases: m.aliases,
        source: "config",
        ownedBy: m.targets[0].upstream,
      };
      this.configured.set(m.id, route);
    }
    this.rebuild();
  }

  /** The route a client's `model` names (id or alias), or undefined. */
  resolve(model: string): ModelRoute | undefined {
    return this.lookup.get(model);
  }

  /** Every route once, configured first, in a stable order. */
  list(): ModelRoute[] {
    const seen = new Set<ModelRoute>();
    for (const route of this.lookup.values()) seen.add(route);
    return [...seen];
  }

  /** Replaces the routes discovered on one upstream (models it dropped disappear). */
  setDiscovered(upstream: UpstreamConfig, modelIds: string[]): void {
    const state = this.upstreams.get(upstream.name);
    if (!state) return;
    const routes = new Map<string, ModelRoute>();
    const before = this.discovered.get(upstream.name);
    for (const id of modelIds) {
      // A model still listed keeps its route, and with it its target's circuit.
      const kept = before?.get(id);
      if (kept) {
        routes.set(id, kept);
        continue;
      }
      routes.set(id, {
        id,
        free: upstream.discover_free,
        price: { prompt: 0, completion: 0, request: 0 },
        endpoints: ENDPOINT_NAMES,
        targets: [{ upstream: state, model: id, weight: 1, circuit: closedCircuit(), ttfbEwmaMs: null }],
        strategy: "failover",
        aliases: [],
        source: "discovered",
        ownedBy: upstream.name,
      });
    }
    this.discovered.set(upstream.name, routes);
    this.rebuild();
  }

  /** The ids of the routes discovered on one upstream, in its list's order (configured ids included). */
  discoveredIds(upstream: string): string[] {
    return [...(this.discovered.get(upstream)?.keys() ?? [])];
  }

  private rebuild(): void {
    const next = new Map<string, ModelRoute>();
    for (const route of this.configured.values()) {
      next.set(route.id, route);
      for (const alias of route.aliases) next.set(alias, route);
    }
    for (const routes of this.discovered.values()) {
      for (const route of routes.values()) if (!next.has(route.id)) next.set(route.id, route);
    }
    this.lookup = next;
  }
}
