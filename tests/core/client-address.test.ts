/**
 * The client address a request is limited by (src/request-meta.ts): the socket's, or, behind a
 * trusted proxy, the right-most X-Forwarded-For entry no trusted proxy added, and only when that
 * entry is an IP address (regression: any string was taken, so a client behind a pass-through
 * proxy chose its own rate-limit subjects, of any length).
 */
import { describe, expect, test } from "bun:test";
import { requestMeta } from "../../src/request-meta";

const PROXY = "10.0.0.1";
const TRUSTED = new Set([PROXY, "10.0.0.2"]);

function clientOf(socket: string, forwardedFor?: string): string {
  const request = new Request("http://localhost/v1/chat/completions", { headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor } });
  return requestMeta(request, TRUSTED).clientIp({ requestIP: () => ({ address: socket }) });
}

describe("client address", () => {
  test("a socket that is not a trusted proxy is the client, whatever X-Forwarded-For says", () => {
    expect(clientOf("203.0.113.9", "1.2.3.4")).toBe("203.0.113.9");
    expect(clientOf("::ffff:203.0.113.9")).toBe("203.0.113.9");
  });

  test("behind trusted proxies: the right-most entry they did not add", () => {
    expect(clientOf(PROXY)).toBe(PROXY);
    expect(clientOf(PROXY, "1.2.3.4")).toBe("1.2.3.4");
    expect(clientOf(`::ffff:${PROXY}`, "1.2.3.4")).toBe("1.2.3.4");
    expect(clientOf(PROXY, "9.9.9.9, 1.2.3.4, 10.0.0.2")).toBe("1.2.3.4");
    expect(clientOf(PROXY, "2001:db8::7")).toBe("2001:db8::7");
    expect(clientOf(PROXY, "10.0.0.2")).toBe("10.0.0.2");
    // An IPv4 address written as IPv6 is that IPv4 address: one bucket, and a trusted proxy is recognised.
    expect(clientOf(PROXY, "::ffff:9.9.9.9")).toBe("9.9.9.9");
    expect(clientOf(PROXY, "9.9.9.9, ::ffff:10.0.0.2")).toBe("9.9.9.9");
  });

  test("an entry that is not an IP address counts as the proxy's own request", () => {
    expect(clientOf(PROXY, "not-an-address")).toBe(PROXY);
    expect(clientOf(PROXY, `1.2.3.4, ${"a".repeat(6_000)}`)).toBe(PROXY);
    expect(clientOf(PROXY, "1.2.3.4:5678")).toBe(PROXY);
    // A zone makes an IPv6 address any length (regression: 8,000-character zones, 265 MB of buckets).
    expect(clientOf(PROXY, `fe80::1%${"z".repeat(8_000)}`)).toBe(PROXY);
    expect(clientOf(PROXY, "fe80::1%eth0")).toBe(PROXY);
    // Garbage to the left of the entry the proxy appended is never looked at.
    expect(clientOf(PROXY, "junk, 1.2.3.4")).toBe("1.2.3.4");
  });
});
