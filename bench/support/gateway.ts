/**
 * The compiled gateway in front of the mock upstream, as the loopback benches run it: the mock
 * `make bench` shares (options.mockUrl), else one of the bench's own; the gateway in a temporary
 * directory with no rate limit in the way and no log line per request, pinned where the harness
 * pins servers. close() ends both, and may be called at any time, however often.
 */
import type { Subprocess } from "bun";
import { freePort, startGateway, type RunningGateway } from "../../tests/support/binary";
import { benchDir, startMock } from "../processes";

/** What bench/run.ts passes every loopback bench; each runs alone without any of it. */
export interface LoopbackBenchOptions {
  /** A running mock upstream (its base URL, ending in /v1); without it the bench starts its own. */
  mockUrl?: string;
  pin?: (pid: number) => void;
  /** The CPUs wrk is pinned to (a taskset list); null leaves it to the scheduler. */
  clientCpus?: string | null;
  durationS?: number;
  concurrency?: number;
}

export interface BenchGateway {
  gateway: RunningGateway;
  mockUrl: string;
  /** Kills the gateway and the mock started for it (a shared mock is left running). */
  close(): void;
}

const UNLIMITED = 1_000_000_000;

/** The settings every loopback bench measures under, ahead of its own TOML. */
const BENCH_SETTINGS = `
[limits]
anonymous = { per_minute = ${UNLIMITED}, per_day = ${UNLIMITED} }
[log]
requests = false
`;

/** Starts the gateway with `config(mockUrl)` (upstreams, models and any other section) after BENCH_SETTINGS. */
export async function startBenchGateway(config: (mockUrl: string) => string, options: Pick<LoopbackBenchOptions, "mockUrl" | "pin">): Promise<BenchGateway> {
  let mock: Subprocess | null = null;
  let mockUrl = options.mockUrl;
  if (!mockUrl) {
    const started = await startMock(freePort(), null);
    mock = started.proc;
    mockUrl = started.url;
  }
  let gateway: RunningGateway;
  try {
    gateway = await startGateway(BENCH_SETTINGS + config(mockUrl), { dir: benchDir("modelgate-bench-") });
  } catch (error) {
    mock?.kill();
    throw error;
  }
  options.pin?.(gateway.proc.pid);
  return {
    gateway,
    mockUrl,
    close: () => {
      gateway.proc.kill();
      mock?.kill();
    },
  };
}
