/**
 * How deeply JSON text nests arrays and objects, counted before it is parsed: over a whole string
 * (nestedDeeperThan), or over its UTF-8 bytes chunk by chunk as they arrive (NestingCounter), so a
 * streamed body too deep is known from its first chunks, before it is joined and decoded.
 * Brackets inside strings do not count. Text that is not JSON may be counted wrongly: JSON.parse
 * refuses it either way. A byte of a multi-byte UTF-8 character is never below 0x80, so never a
 * quote, a backslash or a bracket: counting bytes counts the same as counting characters.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;

/** Whether `text` opens more than `max` arrays and objects inside one another, in one pass. */
export function nestedDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      i = stringEnd(text, i);
      if (i === -1) return false;
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > max) return true;
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) depth--;
  }
  return false;
}

/** The index of the quote that closes the string opened at `open`, or -1 (found with indexOf, which is far faster than a loop). */
function stringEnd(text: string, open: number): number {
  let close = text.indexOf('"', open + 1);
  while (close !== -1) {
    let backslashes = 0;
    while (text.charCodeAt(close - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return close;
    close = text.indexOf('"', close + 1);
  }
  return -1;
}

/** nestedDeeperThan over bytes fed in order; a string or an escape may span two chunks. */
export class NestingCounter {
  private depth = 0;
  private inString = false;
  /** The last chunk ended inside a string on an odd run of backslashes: the next byte is escaped. */
  private escapeNext = false;

  constructor(private readonly max: number) {}

  /** Counts `bytes`; true once the text so far has opened more than `max` levels. */
  deeperAfter(bytes: Uint8Array): boolean {
    let i = 0;
    if (this.inString) {
      i = this.stringEnd(bytes, 0);
      if (i === -1) return false;
      this.inString = false;
      i += 1;
    }
    for (; i < bytes.length; i++) {
      const c = bytes[i];
      if (c === QUOTE) {
        i = this.stringEnd(bytes, i + 1);
        if (i === -1) {
          this.inString = true;
          return false;
        }
      } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
        if (++this.depth > this.max) return true;
      } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) this.depth--;
    }
    return false;
  }

  /** The index of the quote closing a string whose text goes on at `from`, or -1 when it does not close in `bytes`. */
  private stringEnd(bytes: Uint8Array, from: number): number {
    let start = from;
    if (this.escapeNext) {
      if (start >= bytes.length) return -1;
      this.escapeNext = false;
      start += 1;
    }
    let close = bytes.indexOf(QUOTE, start);
    while (close !== -1) {
      // Most quotes have no backslash before them: no count to make.
      if (close === start || bytes[close - 1] !== BACKSLASH || backslashesBefore(bytes, close, start) % 2 === 0) return close;
      close = bytes.indexOf(QUOTE, close + 1);
    }
    this.escapeNext = backslashesBefore(bytes, bytes.length, start) % 2 === 1;
    return -1;
  }
}

/** The run of backslashes just before `at`, not reaching back past `start`. */
function backslashesBefore(bytes: Uint8Array, at: number, start: number): number {
  let i = at;
  while (i > start && bytes[i - 1] === BACKSLASH) i--;
  return at - i;
}
