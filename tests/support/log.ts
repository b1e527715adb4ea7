/**
 * Captures the process-wide logger's lines (src/log.ts) for a test, then puts the default back.
 */
import { createLogger, setLogger } from "../../src/log";

export interface CapturedLog {
  /** Every line logged since the capture began, in order. */
  lines(): string[];
  restore(): void;
}

export function captureLog(): CapturedLog {
  const lines: string[] = [];
  setLogger(createLogger({ level: "debug", requests: false, write: (text) => void lines.push(text) }));
  return { lines: () => lines, restore: () => setLogger(null) };
}
