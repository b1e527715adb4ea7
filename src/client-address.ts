/**
 * Who a request comes from, for rate limits and sign-in throttling: the socket's address, or the
 * client named in X-Forwarded-For when the socket is a trusted proxy (`server.trusted_proxies`:
 * addresses or CIDR blocks). Addresses are compared in one canonical spelling (IPv6 compressed and
 * lower-case, `::ffff:1.2.3.4` as `1.2.3.4`), so a proxy that writes `2001:DB8::1` or
 * `2001:db8:0:0:0:0:0:1` names one client, not three. An IPv6 client is limited per /64
 * (addressSubject): one subscriber usually holds a whole /64, and could otherwise take a fresh
 * limit with each of its 2^64 addresses.
 */
import { BlockList, isIP } from "node:net";

export interface TrustedProxies {
  has(address: string): boolean;
}

const NONE: TrustedProxies = { has: () => false };

/** `1.2.3.4`, `fd00::1`, `10.0.0.0/8` or `fd00::/8` in canonical form, or null when it is none of those. */
export function parseProxyEntry(entry: string): { address: string; prefix: number | null } | null {
  const [text, bits, extra] = entry.trim().split("/");
  const address = canonicalAddress(text);
  if (address === null || extra !== undefined) return null;
  if (bits === undefined) return { address, prefix: null };
  const prefix = /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  return prefix <= (isIP(address) === 4 ? 32 : 128) ? { address, prefix } : null;
}

/** The matcher for `server.trusted_proxies` (entries already checked by the config's load). */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  if (entries.length === 0) return NONE;
  const list = new BlockList();
  for (const entry of entries) {
    const parsed = parseProxyEntry(entry);
    if (parsed === null) continue;
    const family = isIP(parsed.address) === 4 ? "ipv4" : "ipv6";
    if (parsed.prefix === null) list.addAddress(parsed.address, family);
    else list.addSubnet(parsed.address, parsed.prefix, family);
  }
  return { has: (address) => list.check(address, isIP(address) === 4 ? "ipv4" : "ipv6") };
}

/** The client's canonical address: the socket's, or X-Forwarded-For's right-most untrusted entry behind a trusted proxy. */
export function clientAddress(request: Request, socket: string, trusted: TrustedProxies): string {
  // The socket's address is a valid one: only IPv6 (and mapped IPv4) can be spelled otherwise.
  const address = socket.includes(":") ? (canonicalAddress(socket) ?? socket) : socket;
  if (!trusted.has(address)) return address;
  const forwarded = request.headers.get("x-forwarded-for");
  if (!forwarded) return address;
  // The right-most entry not added by a trusted proxy is the client. It must be an IP address:
  // anything else was passed through from the client, and would be a rate-limit subject of its
  // choosing (any length, any number of them); such requests count as the proxy's own.
  const hops = forwarded
    .split(",")
    .map((h) => h.trim())
    .filter(Boolean);
  let i = hops.length - 1;
  let client = i >= 0 ? canonicalAddress(hops[i]) : null;
  while (i > 0 && client !== null && trusted.has(client)) client = canonicalAddress(hops[--i]);
  return client ?? address;
}

/** The rate-limit subject of an address: itself for IPv4, its /64 for IPv6 (`2001:db8:1:2::/64`). */
export function addressSubject(address: string): string {
  if (!address.includes(":")) return address;
  const [head, tail] = address.split("::");
  const groups = head === "" ? [] : head.split(":");
  if (tail !== undefined) {
    const after = tail === "" ? [] : tail.split(":");
    groups.push(...Array<string>(8 - groups.length - after.length).fill("0"), ...after);
  }
  return `${groups.slice(0, 4).join(":")}::/64`;
}

/**
 * A plain IP address (no `%zone`, which may be any length) in one spelling, or null: IPv4 as it
 * is, IPv6 as a URL host serialises it, an IPv4-mapped IPv6 address as the IPv4 address it is.
 */
export function canonicalAddress(text: string): string | null {
  const kind = isIP(text);
  if (kind === 4) return text;
  if (kind !== 6 || text.length > 45 || text.includes("%")) return null;
  const host = new URL(`http://[${text}]`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped === null) return host;
  const high = parseInt(mapped[1], 16);
  const low = parseInt(mapped[2], 16);
  return `${high >> 8}.${high & 255}.${low >> 8}.${low & 255}`;
}
