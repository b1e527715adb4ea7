/**
 * A config file read as text: at most MAX_CONFIG_BYTES (`--config /dev/zero` read on without end),
 * and UTF-8, as TOML must be (a Latin-1 `café` became `caf\uFFFD`, a model id no client can send).
 * Failures are ConfigErrors naming the file.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { ConfigError } from "./errors";

const MAX_CONFIG_BYTES = 16 * 1024 * 1024;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** `bytes` as UTF-8 text, or null when they are not UTF-8 (decoded loosely, each bad byte would be U+FFFD). */
export function strictUtf8(bytes: Uint8Array): string | null {
  try {
    return utf8.decode(bytes);
  } catch {
    return null;
  }
}

/** `file`'s text; `label` starts the error messages (the file, or the key that named it). */
export function readConfigText(file: string, label: string): string {
  const chunks: Buffer[] = [];
  let size = 0;
  let fd: number;
  try {
    fd = openSync(file, "r");
  } catch (err) {
    throw new ConfigError(`${label}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`);
  }
  try {
    for (;;) {
      const chunk = Buffer.allocUnsafe(65_536);
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      size += read;
      if (size > MAX_CONFIG_BYTES) throw new ConfigError(`${label}: larger than ${MAX_CONFIG_BYTES / 1024 / 1024} MiB; is it the config file?`);
      chunks.push(chunk.subarray(0, read));
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError(`${label}: cannot read (${(err as NodeJS.ErrnoException).code ?? err})`);
  } finally {
    closeSync(fd);
  }
  const text = strictUtf8(Buffer.concat(chunks, size));
  if (text === null) throw new ConfigError(`${label}: not UTF-8 text (TOML files are UTF-8; convert it, e.g. with iconv -f latin1 -t utf-8)`);
  return text;
}
