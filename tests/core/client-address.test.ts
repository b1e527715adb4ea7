/**
 * The client address a request is limited by (src/client-address.ts): the socket's, or, behind a
 * trusted proxy, the right-most X-Forwarded-For entry no trusted proxy added, and only when that
 * entry is an IP address (regression: any string was taken, so a client behind a pass-through
 * proxy chose its own rate-limit subjects, of any length).
 */
import { describe, expect, test } from "bun:test";
import { requestMeta } from "../../src/requests/meta";
import { addressSubject, canonicalAddress, parseProxyEntry, trustedProxies } from "../../src/client-address";
import { buildConfig } from "../../src/config/load";

const PROXY = "10.0.0.1";
const TRUSTED = trustedProxies([PROXY, "10.0.0.2"]);

function clientOf(socket: string, forwardedFor?: string, trusted = TRUSTED): string {
  const request = new Request("http://localhost/v1/chat/completions", { headers: forwardedFor === undefined ? {} : { "x-forwarded-for": forwardedFor } });
  return requestMeta(request, trusted).clientIp({ requestIP: () => ({ address: socket }) });
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

describe("one spelling per address, and CIDR blocks (regression: 10.0.0.0/8 and other spellings were silently never trusted)", () => {
  test("IPv6 written any way is one client; ::FFFF: mapped IPv4 too", () => {
    for (const spelling of ["2001:db8::1", "2001:DB8::1", "2001:db8:0:0:0:0:0:1", "2001:0db8::0001"]) expect(clientOf(PROXY, spelling)).toBe("2001:db8::1");
    expect(clientOf(PROXY, "::FFFF:12.12.12.12")).toBe("12.12.12.12");
    expect(clientOf("::FFFF:203.0.113.9")).toBe("203.0.113.9");
    expect(canonicalAddress("0:0:0:0:0:0:0:1")).toBe("::1");
    expect(canonicalAddress("010.0.0.1")).toBeNull();
  });

  test("trusted_proxies takes addresses in any spelling and CIDR blocks", () => {
    const trusted = trustedProxies(["10.0.0.0/8", "fd00::/8", "0:0:0:0:0:0:0:1", "::FFFF:192.0.2.1"]);
    expect(clientOf("10.200.3.4", "1.2.3.4", trusted)).toBe("1.2.3.4");
    expect(clientOf("fd12::9", "1.2.3.4", trusted)).toBe("1.2.3.4");
    expect(clientOf("::1", "1.2.3.4", trusted)).toBe("1.2.3.4");
    expect(clientOf("192.0.2.1", "1.2.3.4", trusted)).toBe("1.2.3.4");
    expect(clientOf("11.0.0.1", "1.2.3.4", trusted)).toBe("11.0.0.1");
    // A chain of proxies inside the block: the right-most address outside it is the client.
    expect(clientOf("10.0.0.1", "1.2.3.4, 10.9.9.9, 10.1.1.1", trusted)).toBe("1.2.3.4");
  });

  test("an entry that is neither is a config error naming it", () => {
    for (const entry of ["localhost", "10.0.0.0/33", "fd00::/129", "10.0.0.0/8/8", "10.0.0.0/-1", "10.0.0.0/ 8", "not an address at all"]) {
      expect(parseProxyEntry(entry)).toBeNull();
      expect(() => buildConfig({ server: { trusted_proxies: ["127.0.0.1", entry] } }, { env: {} })).toThrow(
        `server.trusted_proxies[1]: "${entry}" is not an IP address or a CIDR block`,
      );
    }
    expect(parseProxyEntry(" 10.0.0.0/8 ")).toEqual({ address: "10.0.0.0", prefix: 8 });
    expect(parseProxyEntry("FD00::/8")).toEqual({ address: "fd00::", prefix: 8 });
  });
});

describe("rate-limit subjects", () => {
  test("IPv4 per address; IPv6 per /64, so rotating addresses within one's own block gains nothing", () => {
    expect(addressSubject("203.0.113.9")).toBe("203.0.113.9");
    expect(addressSubject("2001:db8:1:2:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:1:2::/64");
    expect(addressSubject("2001:db8:1:2::7")).toBe("2001:db8:1:2::/64");
    expect(addressSubject("2001:db8::7")).toBe("2001:db8:0:0::/64");
    expect(addressSubject("::1")).toBe("0:0:0:0::/64");
    expect(addressSubject("fe80::")).toBe("fe80:0:0:0::/64");
  });
});
