/**
 * The gateway's metrics: fed one RequestRecord per finished model request (observe() is a handful
 * of Map updates, no I/O; the server calls it in batches, see src/requests/sink.ts), and read at
 * scrape time from the live upstream states. Other parts add their own gauges with registerGauge
 * (for example the webhook outbox depth), which are computed only when /metrics is scraped.
 */
import type { RequestRecord } from "../requests/record";
import type { ModelRegistry, ModelRoute } from "../router/registry";
import { circuitState, type CircuitState } from "../router/circuit";
import { targetState } from "../router/target-state";
import { Counter, Histogram, renderSamples, type Sample } from "./exposition";

export interface GaugeSource {
  name: string;
  help: string;
  /** A single value, or labelled samples. Called at scrape time; must be cheap and must not throw. */
  collect: () => number | Sample[];
}

export interface GatewayMetrics {
  observe(record: RequestRecord): void;
  registerGauge(source: GaugeSource): void;
  render(): string;
  /** The counters, for tests and the status page. */
  readonly requests: Counter;
  readonly rateLimited: Counter;
}

export interface GatewayMetricsOptions {
  /** The routes served now: a reload swaps the registry, and the counters outlive it. */
  registry: () => ModelRegistry;
  version: string;
  /** Process start, epoch ms. */
  startedAt: number;
  now: () => number;
  /** Called first thing in render(): hands over observations still queued (../requests/sink.ts). */
  beforeRender?: () => void;
}

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const OVERHEAD_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
const CIRCUIT_STATES: CircuitState[] = ["closed", "half-open", "open"];

export function createGatewayMetrics(options: GatewayMetricsOptions): GatewayMetrics {
  const requests = new Counter(
    "modelgate_requests_total",
    "Finished requests to the model endpoints (endpoint: chat, completions, embeddings, rerank, transcriptions, translations, speech).",
    ["model", "endpoint", "upstream", "identity", "status"],
  );
  const rateLimited = new Counter("modelgate_rate_limited_total", "Model requests refused with 429 by the gateway's rate limits.", ["identity"]);
  const tokens = new Counter("modelgate_tokens_total", "Tokens metered, as reported by upstreams (estimated for broken streams).", ["model", "type"]);
  const credits = new Counter("modelgate_credits_total", "Credits charged (1 credit = 1,000,000 micro-credits).", ["model"]);
  const total = new Histogram(
    "modelgate_request_duration_seconds",
    "Total time of a model request, streams until their last byte.",
    ["model", "endpoint"],
    LATENCY_BUCKETS,
  );
  const upstream = new Histogram(
    "modelgate_upstream_duration_seconds",
    "Time spent waiting on upstreams per request, failed attempts included.",
    ["upstream"],
    LATENCY_BUCKETS,
  );
  const overhead = new Histogram("modelgate_gateway_overhead_seconds", "The gateway's own time per request: total minus upstream time.", [], OVERHEAD_BUCKETS);
  const gauges: GaugeSource[] = [];

  function observe(r: RequestRecord): void {
    const status = String(r.status);
    requests.inc([r.model, r.endpoint, r.upstream ?? "", r.identity, status]);
    if (r.status === 429 && r.upstream === null) rateLimited.inc([r.identity]);
    if (r.promptTokens > 0) tokens.inc([r.model, "prompt"], r.promptTokens);
    if (r.completionTokens > 0) tokens.inc([r.model, "completion"], r.completionTokens);
    if (r.costMicro > 0) credits.inc([r.model], r.costMicro);
    total.observe([r.model, r.endpoint], r.latencyMs / 1000);
    if (r.upstream !== null || r.upstreamMs > 0) upstream.observe([r.upstream ?? ""], r.upstreamMs / 1000);
    overhead.observe([], Math.max(0, r.latencyMs - r.upstreamMs) / 1000);
  }

  /**
   * Drops the series of models that are no longer routes (an upstream that changed its model
   * list), so that the series stay as many as the routes there are, not every id ever served. A
   * model still routed at the previous scrape is kept for this one, so what it counted since is
   * seen once. A model that comes back starts from zero, which Prometheus reads as a reset.
   */
  let routedAtLastScrape = new Set<string>();
  function forgetGoneModels(routes: readonly ModelRoute[]): void {
    const routed = new Set(routes.map((route) => route.id));
    routed.add(""); // requests refused before a route was found
    const keep = (labels: string[]) => routed.has(labels[0]) || routedAtLastScrape.has(labels[0]);
    for (const metric of [requests, tokens, credits, total]) metric.retain(keep);
    routedAtLastScrape = routed;
  }

  function render(): string {
    options.beforeRender?.();
    // One list of the routes per scrape: its series, the count and the targets all read the same.
    const registry = options.registry();
    const routes = registry.list();
    forgetGoneModels(routes);
    const now = options.now();
    const ups = [...registry.upstreams.values()];
    const each = <T>(f: (u: (typeof ups)[number]) => T): Array<{ labels: Record<string, string>; value: T }> =>
      ups.map((u) => ({ labels: { upstream: u.name }, value: f(u) }));
    let out = renderSamples("modelgate_build_info", "Version of the running gateway.", "gauge", [{ labels: { version: options.version }, value: 1 }]);
    out += renderSamples("modelgate_uptime_seconds", "Seconds since the gateway started.", "gauge", [
      { labels: {}, value: Math.floor((Date.now() - options.startedAt) / 1000) },
    ]);
    out += renderSamples("process_resident_memory_bytes", "Resident memory of the gateway process.", "gauge", [
      { labels: {}, value: process.memoryUsage.rss() },
    ]);
    out += renderSamples("modelgate_models", "Model routes currently served (configured and discovered).", "gauge", [{ labels: {}, value: routes.length }]);
    out += requests.render();
    out += rateLimited.render();
    out += tokens.render();
    out += credits.render(1_000_000);
    out += total.render();
    out += upstream.render();
    out += overhead.render();
    out += renderSamples(
      "modelgate_upstream_up",
      "1 when the upstream's circuit is closed, 0 when open or probing.",
      "gauge",
      each((u) => (circuitState(u, now) === "closed" ? 1 : 0)),
    );
    out += renderSamples(
      "modelgate_upstream_circuit_state",
      "Circuit breaker state per upstream (one of closed, half-open, open is 1).",
      "gauge",
      ups.flatMap((u) => CIRCUIT_STATES.map((state) => ({ labels: { upstream: u.name, state }, value: circuitState(u, now) === state ? 1 : 0 }))),
    );
    out += renderSamples(
      "modelgate_upstream_consecutive_failures",
      "Failed attempts in a row per upstream.",
      "gauge",
      each((u) => u.consecutiveFailures),
    );
    out += renderSamples(
      "modelgate_upstream_attempts_total",
      "Attempts sent to each upstream, by outcome (failure: connection error, timeout, 429, 5xx or a broken stream).",
      "counter",
      ups.flatMap((u) => [
        { labels: { upstream: u.name, outcome: "success" }, value: u.successes },
        { labels: { upstream: u.name, outcome: "failure" }, value: u.failures },
      ]),
    );
    out += renderSamples(
      "modelgate_upstream_circuit_opened_total",
      "Times each upstream's circuit opened.",
      "counter",
      each((u) => u.opened),
    );
    // A model answered 503 by every target is down though its upstreams are up: its own circuit
    // opened (429s or 5xx for this model alone, as Ollama out of memory for one large model).
    out += renderSamples(
      "modelgate_target_up",
      "1 when a model's target takes requests (its upstream's circuit and its own are closed), 0 when either is open or probing.",
      "gauge",
      // `target` is the upstream's name for the model: one route may have two targets on one upstream.
      routes.flatMap((route) =>
        route.targets.map((t) => ({
          labels: { model: route.id, upstream: t.upstream.name, target: t.model },
          value: targetState(t, now) === "closed" ? 1 : 0,
        })),
      ),
    );
    out += renderSamples(
      "modelgate_upstream_ttfb_seconds",
      "Moving average of time to first byte per upstream (least-latency strategy).",
      "gauge",
      ups.filter((u) => u.ttfbEwmaMs !== null).map((u) => ({ labels: { upstream: u.name }, value: u.ttfbEwmaMs! / 1000 })),
    );
    for (const gauge of gauges) {
      let samples: Sample[];
      try {
        const value = gauge.collect();
        samples = typeof value === "number" ? [{ labels: {}, value }] : value;
      } catch {
        continue;
      }
      out += renderSamples(gauge.name, gauge.help, "gauge", samples);
    }
    return out;
  }

  return {
    observe,
    registerGauge: (source) => void gauges.push(source),
    render,
    requests,
    rateLimited,
  };
}
