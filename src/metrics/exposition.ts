/**
 * Prometheus text exposition (format 0.0.4), hand-written: labelled counters and histograms that
 * cost a few Map lookups and no allocation per observation, and gauges computed at scrape time.
 * Series are created on first use and removed only by retain(), so label values must come from a
 * bounded set (configured and discovered models, upstreams, identity kinds, HTTP statuses), never
 * from client input.
 */

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/**
 * Series by their label values, as nested Maps keyed by each value in turn: finding an existing
 * series allocates nothing (no joined key), and label values from config are the same strings
 * every time, so their hashes are already computed. Series are kept in creation order for render.
 */
class SeriesIndex<T extends { labels: string[] }> {
  all: T[] = [];
  private root = new Map<string, unknown>();
  private only: T | null = null;

  /** Drops every series whose labels `keep` refuses; a series made again later starts from zero. */
  retain(keep: (labels: string[]) => boolean): void {
    const kept = this.all.filter((series) => keep(series.labels));
    if (kept.length === this.all.length) return;
    this.all = [];
    this.root = new Map();
    this.only = null;
    for (const series of kept) this.find(series.labels, () => series);
  }

  find(labels: string[], create: (labels: string[]) => T): T {
    if (labels.length === 0) return (this.only ??= this.add(create(labels)));
    let node = this.root;
    const last = labels.length - 1;
    for (let i = 0; i < last; i++) {
      let next = node.get(labels[i]) as Map<string, unknown> | undefined;
      if (next === undefined) node.set(labels[i], (next = new Map()));
      node = next;
    }
    const found = node.get(labels[last]) as T | undefined;
    if (found !== undefined) return found;
    const series = this.add(create(labels));
    node.set(labels[last], series);
    return series;
  }

  peek(labels: string[]): T | undefined {
    if (labels.length === 0) return this.only ?? undefined;
    let node: unknown = this.root;
    for (const label of labels) node = (node as Map<string, unknown> | undefined)?.get(label);
    return node as T | undefined;
  }

  private add(series: T): T {
    this.all.push(series);
    return series;
  }
}

export class Counter {
  private readonly series = new SeriesIndex<{ labels: string[]; value: number }>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}

  inc(labels: string[], by = 1): void {
    this.series.find(labels, newCount).value += by;
  }

  retain(keep: (labels: string[]) => boolean): void {
    this.series.retain(keep);
  }

  /** Current value of one series (0 when never incremented). */
  get(labels: string[]): number {
    return this.series.peek(labels)?.value ?? 0;
  }

  /** `divisor`: the unit the values are counted in, per unit shown (1,000,000 micro-credits per credit); dividing keeps 200,000 / 1e6 exactly 0.2. */
  render(divisor = 1): string {
    let out = header(this.name, this.help, "counter");
    for (const { labels, value } of this.series.all) {
      out += `${this.name}${labelSet(this.labelNames, labels)} ${formatNumber(divisor === 1 ? value : value / divisor)}\n`;
    }
    return out;
  }
}

const newCount = (labels: string[]) => ({ labels, value: 0 });

export class Histogram {
  private readonly series = new SeriesIndex<{ labels: string[]; counts: Float64Array; sum: number; count: number }>();
  private readonly newSeries = (labels: string[]) => ({ labels, counts: new Float64Array(this.buckets.length), sum: 0, count: 0 });
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    /** Upper bounds, ascending. */
    readonly buckets: readonly number[],
  ) {}

  observe(labels: string[], value: number): void {
    const entry = this.series.find(labels, this.newSeries);
    let i = 0;
    while (i < this.buckets.length && value > this.buckets[i]) i += 1;
    if (i < this.buckets.length) entry.counts[i] += 1;
    entry.sum += value;
    entry.count += 1;
  }

  retain(keep: (labels: string[]) => boolean): void {
    this.series.retain(keep);
  }

  render(): string {
    let out = header(this.name, this.help, "histogram");
    for (const { labels, counts, sum, count } of this.series.all) {
      let cumulative = 0;
      for (let i = 0; i < this.buckets.length; i++) {
        cumulative += counts[i];
        out += `${this.name}_bucket${labelSet([...this.labelNames, "le"], [...labels, formatNumber(this.buckets[i])])} ${cumulative}\n`;
      }
      out += `${this.name}_bucket${labelSet([...this.labelNames, "le"], [...labels, "+Inf"])} ${count}\n`;
      out += `${this.name}_sum${labelSet(this.labelNames, labels)} ${formatNumber(sum)}\n`;
      out += `${this.name}_count${labelSet(this.labelNames, labels)} ${count}\n`;
    }
    return out;
  }
}

/** A gauge (or counter read from elsewhere) whose samples are computed when scraped. */
export function renderSamples(name: string, help: string, type: "gauge" | "counter", samples: Sample[]): string {
  let out = header(name, help, type);
  for (const { labels, value } of samples) {
    out += `${name}${labelSet(Object.keys(labels), Object.values(labels))} ${formatNumber(value)}\n`;
  }
  return out;
}

function header(name: string, help: string, type: string): string {
  return `# HELP ${name} ${help.replaceAll("\\", "\\\\").replaceAll("\n", "\\n")}\n# TYPE ${name} ${type}\n`;
}

function labelSet(names: readonly string[], values: readonly string[]): string {
  if (names.length === 0) return "";
  let out = "{";
  for (let i = 0; i < names.length; i++) {
    if (i > 0) out += ",";
    out += `${names[i]}="${escapeLabel(values[i] ?? "")}"`;
  }
  return `${out}}`;
}

function escapeLabel(value: string): string {
  return value.replaceAll("\\", "\\\\").replaceAll('"', '\\"').replaceAll("\n", "\\n");
}

function formatNumber(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return String(value);
}
