/**
 * The gateway's memory with a thousand slow streams open: the compiled binary serves
 * FOOTPRINT_STREAMS (1,000) concurrent streamed chat requests from raw loopback sockets to a mock
 * upstream that sends each stream's first chunk and then holds it, and the gateway's RSS is read
 * from /proc/PID/status once every client has its first event, before the streams are released to
 * finish. Bounded: the streams are released, and every socket closed, within STREAMS_WITHIN_MS.
 * `make bench` includes it beside the start-up figures; alone, `bun bench/footprint.ts` prints
 * idle RSS, RSS with the streams open and exec to healthy against their targets.
 */
import type { Socket } from "bun";
import { startMockUpstream } from "../tests/support/mock-upstream";
import { BENCH_MODEL, measureStartup, startModelgate, statusMb } from "./peers/modelgate";
import { killOnExit } from "./processes";
import { footprintVerdicts, verdictTable } from "./report";

export const FOOTPRINT_STREAMS = Number(process.env.FOOTPRINT_STREAMS ?? 1000);
const STREAMS_WITHIN_MS = 60_000;

export interface OpenStreamsResult {
  streams: number;
  /** The gateway's RSS in MB after 20 requests and a pause, before the streams open. */
  beforeMb: number;
  /** RSS, and of it anonymous and file-backed, in MB while every stream is open. */
  openMb: number;
  openAnonMb: number;
  openFileMb: number;
}

/** A streamed chat request on a raw socket (fetch in Bun sends at most 256 at once). */
function streamRequest(port: number): string {
  const body = JSON.stringify({ model: BENCH_MODEL, stream: true, messages: [{ role: "user", content: "hold on" }] });
  return `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export async function measureOpenStreams(options: { streams: number; pin?: (pid: number) => void }): Promise<OpenStreamsResult> {
  let release = (): void => {};
  // Streams stop after their first chunk until released; the non-streamed warm-up is answered whole.
  const mock = startMockUpstream({ stallAfterChunks: 1, stallUntil: new Promise<void>((resolve) => (release = resolve)) });
  // One connection per stream to the upstream (64 by default), and silences longer than the run.
  const gateway = await startModelgate(mock.url, undefined, { upstream: [`max_connections = ${options.streams}`, "idle_timeout_ms = 600000"] });
  killOnExit(gateway.proc);
  options.pin?.(gateway.proc.pid);
  const port = Number(new URL(gateway.url).port);
  const sockets: Socket<{ streaming: boolean }>[] = [];
  try {
    const warm = JSON.stringify({ model: BENCH_MODEL, messages: [{ role: "user", content: "hi" }] });
    for (let i = 0; i < 20; i++)
      await fetch(`${gateway.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: warm }).then((r) => r.text());
    await Bun.sleep(500);
    const beforeMb = statusMb(gateway.proc.pid, "VmRSS");

    let firstEvents = 0;
    const request = streamRequest(port);
    for (let i = 0; i < options.streams; i++) {
      const socket = await Bun.connect<{ streaming: boolean }>({
        hostname: "127.0.0.1",
        port,
        data: { streaming: false },
        socket: {
          data(s, chunk) {
            if (s.data.streaming || !chunk.toString("latin1").includes("data: ")) return;
            s.data.streaming = true;
            firstEvents += 1;
          },
        },
      });
      socket.write(request);
      sockets.push(socket);
    }
    const deadline = Date.now() + STREAMS_WITHIN_MS;
    while (firstEvents < options.streams) {
      if (Date.now() > deadline)
        throw new Error(`only ${firstEvents} of ${options.streams} streams had their first event within ${STREAMS_WITHIN_MS / 1000} s`);
      await Bun.sleep(50);
    }
    await Bun.sleep(500);
    const pid = gateway.proc.pid;
    return { streams: options.streams, beforeMb, openMb: statusMb(pid, "VmRSS"), openAnonMb: statusMb(pid, "RssAnon"), openFileMb: statusMb(pid, "RssFile") };
  } finally {
    release();
    for (const socket of sockets) socket.end();
    gateway.proc.kill("SIGTERM");
    await gateway.proc.exited;
    mock.stop();
  }
}

if (import.meta.main) {
  const upstream = startMockUpstream();
  const startup = await measureStartup(upstream.url, { starts: 7, pin: () => {} });
  upstream.stop();
  const streams = await measureOpenStreams({ streams: FOOTPRINT_STREAMS });
  console.log(verdictTable(footprintVerdicts(startup, streams)));
  process.exit(0);
}
