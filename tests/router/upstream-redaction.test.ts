/**
 * What the gateway passes on of an upstream's error answer (src/router/upstream-redaction.ts): the
 * reason in the shapes servers write it, on one line, bounded, and never the gateway's own key.
 */
import { describe, expect, test } from "bun:test";
import { errorExcerpt, withoutSecrets } from "../../src/router/upstream-redaction";

const KEY = 'sk-upstream/secret"key';

describe("errorExcerpt", () => {
  test("the reason from OpenAI's shape, a string error (Ollama), message, or FastAPI's detail; a body that is not JSON as it is", () => {
    expect(errorExcerpt('{"error":{"message":"model requires more system memory (9.1 GiB)","type":"server_error"}}', [])).toBe(
      "model requires more system memory (9.1 GiB)",
    );
    expect(errorExcerpt('{"error":"llama runner process has terminated"}', [])).toBe("llama runner process has terminated");
    expect(errorExcerpt('{"message":"Internal Server Error"}', [])).toBe("Internal Server Error");
    expect(errorExcerpt('{"detail":"Model is loading"}', [])).toBe("Model is loading");
    expect(errorExcerpt("Bad Gateway\n", [])).toBe("Bad Gateway");
  });

  test("nothing when it says nothing: an empty body, JSON without a reason, a reason that is not a string", () => {
    for (const text of ["", "  \n", "{}", '{"error":{"code":500}}', '{"detail":[{"loc":["body"]}]}', "null", "[1]"]) expect(errorExcerpt(text, [])).toBeNull();
  });

  test("one line: control and format characters and runs of space become one space; at most 200 characters", () => {
    expect(errorExcerpt('{"error":"line one\\r\\nline two\\u001b[31m\\u200b end"}', [])).toBe("line one line two [31m end");
    const long = errorExcerpt(JSON.stringify({ error: "✓".repeat(500) }), [])!;
    expect(long).toBe(`${"✓".repeat(200)}…`);
  });

  test("the gateway's key for the upstream never appears, as written or JSON-escaped", () => {
    const said = errorExcerpt(JSON.stringify({ error: { message: `invalid key ${KEY}` } }), [KEY]);
    expect(said).toBe("invalid key [redacted]");
    expect(errorExcerpt(`no such key: ${KEY}`, [KEY])).toBe("no such key: [redacted]");
    // Spelled with \u escapes, as Go's encoding/json writes & < > (regression: decoded, the key showed in clear).
    const goKey = "sk-up/SECRET&key";
    expect(errorExcerpt('{"error":{"message":"key sk-up/SECRET\\u0026key"}}', [goKey])).toBe("key [redacted]");
    expect(withoutSecrets(JSON.stringify({ k: KEY }).replaceAll("/", "\\/"), [KEY])).toBe('{"k":"[redacted]"}');
  });
});

describe("withoutSecrets", () => {
  test('a placeholder key shorter than 6 characters is left in: taken out, it garbled every message (regression: api_key = "null" made an upstream\'s JSON error invalid JSON)', () => {
    const error = '{"error":{"message":"maximum context length is 4096 tokens","type":"invalid_request_error","param":null,"code":null}}';
    for (const key of ["null", "e", "EMPTY", "none"]) expect(withoutSecrets(error, [key])).toBe(error);
    expect(errorExcerpt(error, ["e"])).toBe("maximum context length is 4096 tokens");
    expect(withoutSecrets("key ollama refused", ["ollama"])).toBe("key [redacted] refused");
  });
});
