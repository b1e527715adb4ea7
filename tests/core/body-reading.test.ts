/**
 * How a chat body over 64 KiB is read (src/body.ts): it is complete once its declared length has
 * arrived, whether or not its stream has ended, and a fast upload is read a MiB per event-loop
 * turn, so other requests are answered between its chunks. The bodies are streams made here, so
 * what the reader is handed, and when, is known exactly.
 */
import { expect, test } from "bun:test";
import { BodyBudget, HOSTILE_BODY_HOLD_MS, MAX_JSON_DEPTH, parseJsonBody, readJsonBody, type JsonBody } from "../../src/body";
import { DiscardBudget } from "../../src/discard-budget";

const MiB = 1024 * 1024;
const LIMIT = 10 * MiB;

/** A request whose body stream hands over `chunks` at once and then ends, or never ends (nor errs). */
function streamed(chunks: Uint8Array[], declared: number, ends: boolean): Request {
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      if (ends) controller.close();
    },
  });
  return new Request("http://gateway/v1/chat/completions", { method: "POST", body, headers: { "content-length": String(declared) } });
}

/** Settles with the read's outcome, or with "still reading" if it has not settled within a second. */
function within(read: Promise<unknown>): Promise<unknown> {
  const timeout = new Promise((resolve) => setTimeout(() => resolve("still reading"), 1_000));
  return Promise.race([read.catch((err: unknown) => err), timeout]);
}

function status(outcome: unknown): number | undefined {
  return (outcome as { status?: number }).status;
}

function holdOf(outcome: unknown): number | undefined {
  return (outcome as { options?: { holdMs?: number } }).options?.holdMs;
}

function connectionOf(outcome: unknown): string | undefined {
  return (outcome as { options?: { headers?: Record<string, string> } }).options?.headers?.connection;
}

/** What `parse` throws (undefined when it returns). */
function thrownBy(parse: () => unknown): unknown {
  try {
    parse();
  } catch (err) {
    return err;
  }
  return undefined;
}

const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

/** A chat body 100,000 levels deep, about 200 KB. */
const BOMB = encode(`{"model":"m","x":${"[".repeat(100_000)}${"]".repeat(100_000)}}`);

test("a body whose declared length has arrived is parsed without waiting for its stream to end", async () => {
  const bytes = encode(JSON.stringify({ model: "m", messages: [{ role: "user", content: "a".repeat(200_000) }] }));
  const outcome = await within(readJsonBody(streamed([bytes], bytes.length, false), LIMIT, bytes.length, new BodyBudget(1 << 30)));
  expect(outcome).not.toBe("still reading");
  const read = outcome as JsonBody;
  expect(read.bytes).toBe(bytes.length);
  expect((read.value as { messages: { content: string }[] }).messages[0].content).toHaveLength(200_000);
});

test("a body nested too deep is refused with the 400 once its declared length has arrived", async () => {
  // In two pieces: the nesting is known from the first, the rest is read and dropped.
  const chunks = [BOMB.subarray(0, 65_536), BOMB.subarray(65_536)];
  const outcome = await within(readJsonBody(streamed(chunks, BOMB.length, false), LIMIT, BOMB.length, new BodyBudget(1 << 30)));
  expect(status(outcome)).toBe(400);
  expect(String((outcome as Error).message)).toContain(`more than ${MAX_JSON_DEPTH} levels`);
  expect(holdOf(outcome)).toBe(HOSTILE_BODY_HOLD_MS);
});

test("a body refused in the chunk that completes it takes nothing of the discard budget and keeps its connection", async () => {
  const spent = new DiscardBudget(() => 0, 1, 1);
  expect(spent.take(1)).toBe(true);
  const whole = await within(readJsonBody(streamed([BOMB], BOMB.length, false), LIMIT, BOMB.length, new BodyBudget(1 << 30), spent));
  expect(status(whole)).toBe(400);
  expect(connectionOf(whole)).toBeUndefined();
  // With more to come and nothing left in the budget, the rest is not read: the connection closes.
  const more = await within(readJsonBody(streamed([BOMB.subarray(0, 65_536)], BOMB.length, false), LIMIT, BOMB.length, new BodyBudget(1 << 30), spent));
  expect(status(more)).toBe(400);
  expect(connectionOf(more)).toBe("close");
  // Held back only when received whole: held open, a client still sending would keep the kernel receiving.
  expect(holdOf(whole)).toBe(HOSTILE_BODY_HOLD_MS);
  expect(holdOf(more)).toBeUndefined();
});

test("an oversized body read to be dropped is refused with the 413 once its declared length has arrived", async () => {
  const declared = 11 * MiB;
  const chunks = Array.from({ length: 11 }, () => new Uint8Array(MiB).fill(0x61));
  const outcome = await within(readJsonBody(streamed(chunks, declared, false), LIMIT, declared, new BodyBudget(1 << 30), new DiscardBudget()));
  expect(status(outcome)).toBe(413);
  expect(holdOf(outcome)).toBe(HOSTILE_BODY_HOLD_MS);
});

test("only a body no client sends is held back: one that is merely not JSON, or empty, is answered at once", () => {
  for (const text of ["{not json", ""]) {
    const refused = thrownBy(() => parseJsonBody(text, LIMIT));
    expect(status(refused)).toBe(400);
    expect(holdOf(refused)).toBeUndefined();
  }
  const deep = thrownBy(() => parseJsonBody(`{"x":${"[".repeat(MAX_JSON_DEPTH + 1)}${"]".repeat(MAX_JSON_DEPTH + 1)}}`, LIMIT));
  expect(status(deep)).toBe(400);
  expect(holdOf(deep)).toBe(HOSTILE_BODY_HOLD_MS);
});

/** How many event-loop turns other work got while `read` ran over bytes that had all arrived. */
async function turnsDuring(read: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let reading = true;
  const tick = (): void => {
    if (!reading) return;
    turns += 1;
    setImmediate(tick);
  };
  setImmediate(tick);
  await read().catch(() => {});
  reading = false;
  return turns;
}

test("a fast upload is read a MiB per turn of the event loop, whether it is kept or dropped", async () => {
  const kept = encode(JSON.stringify({ model: "m", pad: "a".repeat(4 * MiB) }));
  const keptChunks = Array.from({ length: Math.ceil(kept.length / 65_536) }, (_, i) => kept.subarray(i * 65_536, (i + 1) * 65_536));
  const keptTurns = await turnsDuring(() => readJsonBody(streamed(keptChunks, kept.length, true), LIMIT, kept.length, new BodyBudget(1 << 30)));
  // 4 MiB and a little: a turn after each whole MiB but the last, which completes the body.
  expect(keptTurns).toBeGreaterThanOrEqual(3);

  const dropped = Array.from({ length: 11 * 16 }, () => new Uint8Array(65_536));
  const droppedTurns = await turnsDuring(() => readJsonBody(streamed(dropped, 11 * MiB, true), LIMIT, 11 * MiB, new BodyBudget(1 << 30), new DiscardBudget()));
  expect(droppedTurns).toBeGreaterThanOrEqual(10);
});
