/**
 * The model field of a multipart body found as its bytes go by, however the body is split into
 * reads, with its value's offsets; and the boundary of a Content-Type.
 */
import { describe, expect, test } from "bun:test";
import { ModelFieldScanner, multipartBoundary } from "../../src/router/multipart-model";

async function encoded(fields: Array<[string, string | Blob]>): Promise<{ bytes: Uint8Array; boundary: string }> {
  const form = new FormData();
  for (const [name, value] of fields) form.append(name, value as string);
  const request = new Request("http://localhost/", { method: "POST", body: form });
  const boundary = multipartBoundary(request.headers.get("content-type")!)!;
  return { bytes: new Uint8Array(await request.arrayBuffer()), boundary };
}

function scan(bytes: Uint8Array, boundary: string, cuts: number[]) {
  const scanner = new ModelFieldScanner(boundary);
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    const found = scanner.push(bytes.subarray(from, cut));
    if (found) return found;
    from = cut;
  }
  return null;
}

describe("ModelFieldScanner", () => {
  test("finds the model after a file, split at every byte, with the offsets of its value", async () => {
    const { bytes, boundary } = await encoded([
      ["file", new Blob([`RIFF${"x".repeat(300)}`])],
      ["model", "whisper-1"],
      ["language", "en"],
    ]);
    for (let cut = 1; cut < bytes.length; cut++) {
      const found = scan(bytes, boundary, [cut]);
      expect(found?.model).toBe("whisper-1");
      expect(Buffer.from(bytes.subarray(found!.start, found!.end)).toString()).toBe("whisper-1");
    }
    // In reads of every size from one byte to past a delimiter's length.
    for (let size = 1; size <= 80; size++) {
      const cuts = Array.from({ length: Math.ceil(bytes.length / size) - 1 }, (_, i) => (i + 1) * size);
      expect(scan(bytes, boundary, cuts)?.model).toBe("whisper-1");
    }
  });

  test("a file whose content looks like a model field is not taken for one", async () => {
    const { bytes, boundary } = await encoded([
      ["file", new Blob(['Content-Disposition: form-data; name="model"\r\n\r\nfake'])],
      ["model", "real"],
    ]);
    expect(scan(bytes, boundary, [])?.model).toBe("real");
  });

  test("a body that ends without a model field is a 400", async () => {
    const { bytes, boundary } = await encoded([["file", new Blob(["RIFF"])]]);
    expect(() => scan(bytes, boundary, [])).toThrow("no model field");
  });

  test("multipartBoundary takes quoted and bare boundaries, and only multipart/form-data", () => {
    expect(multipartBoundary('multipart/form-data; boundary="a b"')).toBe("a b");
    expect(multipartBoundary("Multipart/Form-Data;boundary=xyz")).toBe("xyz");
    expect(multipartBoundary("multipart/mixed; boundary=xyz")).toBeNull();
    expect(multipartBoundary("application/json")).toBeNull();
    expect(multipartBoundary("multipart/form-data")).toBeNull();
  });
});
