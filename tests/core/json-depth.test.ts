/**
 * Nesting counted before parsing (src/json-depth.ts): over bytes fed in chunks it answers as over
 * the whole text, wherever the chunks split a string or an escape; and a streamed chat body too
 * deep is refused from its first chunks (src/body.ts), never kept, read to its end only while the
 * discard budget lasts.
 */
import { expect, test } from "bun:test";
import { NestingCounter, nestedDeeperThan } from "../../src/json-depth";
import { BodyBudget, MAX_JSON_DEPTH, readJsonBody } from "../../src/body";
import { DiscardBudget } from "../../src/discard-budget";

const MiB = 1024 * 1024;

function deeperInChunks(text: string, max: number, cuts: number[]): boolean {
  const bytes = new TextEncoder().encode(text);
  const counter = new NestingCounter(max);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    if (counter.deeperAfter(bytes.subarray(from, cut))) return true;
    from = cut;
  }
  return false;
}

const TEXTS = [
  '{"a":[[["x"]]]}',
  '{"a":"[[[[[[","b":[1]}',
  '{"a":"\\"[[[[[[","b":[1]}',
  '{"a":"\\\\","b":[[[[1]]]]}',
  '{"a":"\\\\\\"[[[[","b":[[1]]}',
  '{"é":"ü[[[[ \\u0022 [[","b":[[[{"c":[]}]]]}',
  "[[[[[[[[]]]]]]]]",
  '{"a":"unterminated [[[[[[',
];

test("bytes in any two or three chunks are counted as the whole text is, strings and escapes split anywhere", () => {
  for (const text of TEXTS) {
    const length = new TextEncoder().encode(text).length;
    for (const max of [0, 1, 2, 3, 4, 6]) {
      const whole = nestedDeeperThan(text, max);
      expect(deeperInChunks(text, max, [])).toBe(whole);
      for (let a = 0; a <= length; a++) {
        expect(deeperInChunks(text, max, [a])).toBe(whole);
        for (let b = a; b <= length; b += 3) expect(deeperInChunks(text, max, [a, b])).toBe(whole);
      }
    }
  }
});

test("a quote escaped by a backslash that ended the previous chunk does not close the string", () => {
  const counter = new NestingCounter(1);
  const bytes = (s: string) => new TextEncoder().encode(s);
  expect(counter.deeperAfter(bytes('{"a":"x\\'))).toBe(false);
  expect(counter.deeperAfter(bytes('"[[[[['))).toBe(false);
  expect(counter.deeperAfter(bytes('","b":[['))).toBe(true);
});

/** A chunked chat body: a prefix nested too deep, then `rest` chunks of 64 KiB, or chunks for ever (Infinity). */
function deepStream(rest: number): { request: Request; pulled: () => number } {
  let pulls = 0;
  const filler = new Uint8Array(64 * 1024).fill(0x5b);
  const body = new ReadableStream<Uint8Array>({
    start: (c) => c.enqueue(new TextEncoder().encode(`{"model":"m","x":${"[".repeat(MAX_JSON_DEPTH + 1)}`)),
    pull: (c) => {
      pulls += 1;
      if (pulls > rest) c.close();
      else c.enqueue(filler);
    },
  });
  return { request: new Request("http://gateway/v1/chat/completions", { method: "POST", body }), pulled: () => pulls };
}

async function refusal(
  request: Request,
  discards: DiscardBudget,
): Promise<{ status?: number; message?: string; options?: { headers?: Record<string, string> } }> {
  return readJsonBody(request, 10 * MiB, NaN, new BodyBudget(1 << 30), discards).then(
    () => ({}),
    (err: unknown) => err as { status?: number },
  );
}

test("a streamed body nested too deep is read to its end and refused with the 400 while the discard budget lasts", async () => {
  const { request, pulled } = deepStream(20);
  const refused = await refusal(request, new DiscardBudget(() => 0, 16 * MiB, 1));
  expect(refused.status).toBe(400);
  expect(refused.message).toContain(`more than ${MAX_JSON_DEPTH} levels deep`);
  expect(pulled()).toBe(21);
  expect(refused.options?.headers?.connection).toBeUndefined();
});

test("past the discard budget, a streamed body nested too deep is refused with the 400 without being read on, and the connection closes", async () => {
  // A body that never ends: reading it to its end would never finish.
  const { request, pulled } = deepStream(Infinity);
  const refused = await refusal(request, new DiscardBudget(() => 0, 1 * MiB, 1));
  expect(refused.status).toBe(400);
  expect(refused.message).toContain(`more than ${MAX_JSON_DEPTH} levels deep`);
  expect(refused.options?.headers?.connection).toBe("close");
  expect(pulled()).toBeLessThan(20);
});
