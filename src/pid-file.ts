/**
 * `modelgate.pid` in data_dir: the running server's process id, written once it listens and
 * removed when it stops, so that `modelgate reload` finds the server to signal. One left behind
 * by a server that was killed names a process that is gone (or, rarely, another one): the file is
 * trusted only while that process runs and is a modelgate. Beside it, `modelgate.reload`: how the
 * server's last reload went, for the command to print.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";

const PID_FILE = "modelgate.pid";
const OUTCOME_FILE = "modelgate.reload";

/** How a reload went: `attempt` counts them since the server started; `message` is what its log said. */
export interface ReloadOutcome {
  pid: number;
  attempt: number;
  ok: boolean;
  message: string;
}

function pidFileOf(dataDir: string): string {
  return join(resolve(dataDir), PID_FILE);
}

/** Writes this process's id; the function returned removes the file if it still names this process. */
export function writePidFile(dataDir: string): () => void {
  const file = pidFileOf(dataDir);
  writeFileSync(file, `${process.pid}\n`);
  return () => {
    try {
      if (readFileSync(file, "utf8").trim() === String(process.pid)) rmSync(file);
      rmSync(join(resolve(dataDir), OUTCOME_FILE), { force: true });
    } catch {
      // already gone
    }
  };
}

/** Records how a reload went, whole or not at all (written beside, then renamed). A failure to write is not the reload's. */
export function writeReloadOutcome(dataDir: string, outcome: ReloadOutcome): void {
  const file = join(resolve(dataDir), OUTCOME_FILE);
  try {
    writeFileSync(`${file}.tmp`, JSON.stringify(outcome));
    renameSync(`${file}.tmp`, file);
  } catch {
    // The log has it too.
  }
}

/** The last reload's outcome for the server `pid`, or null (none yet, or another server's). */
export function readReloadOutcome(dataDir: string, pid: number): ReloadOutcome | null {
  try {
    const outcome = JSON.parse(readFileSync(join(resolve(dataDir), OUTCOME_FILE), "utf8")) as ReloadOutcome;
    return outcome.pid === pid && Number.isSafeInteger(outcome.attempt) ? outcome : null;
  } catch {
    return null;
  }
}

/** The pid of the server running over `dataDir`, or why there is none (a sentence). */
export function runningServer(dataDir: string): { pid: number } | { none: string } {
  const file = pidFileOf(dataDir);
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    return { none: `no server is running over data_dir ${resolve(dataDir)} (no ${file}; a running server writes it)` };
  }
  const pid = /^\d{1,10}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isSafeInteger(pid) || pid <= 1) return { none: `${file} does not hold a process id` };
  const gone = `no server is running over data_dir ${resolve(dataDir)}: ${file} names process ${pid}, which is not a running modelgate (a server that was killed leaves the file behind; it may be removed)`;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: it runs, as another user (the service's): signalling it will say so.
    if ((error as { code?: string }).code !== "EPERM") return { none: gone };
  }
  if (!isModelgate(pid)) return { none: gone };
  return { pid };
}

/** Where /proc says what runs (Linux), the process must be this program; elsewhere it is taken on trust. */
function isModelgate(pid: number): boolean {
  let cmdline: string;
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return true;
  }
  const argv = cmdline.split("\0");
  return argv.includes("serve") || argv.some((arg) => /modelgate|main\.ts$/.test(arg));
}
