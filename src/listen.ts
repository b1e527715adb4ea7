/**
 * What the gateway's two servers (the API and the webhook ingress) share about listening: reading
 * a `host:port` address from config, an error that names the config key when listening fails, and
 * a stop that lets requests in flight finish for a grace period, then cuts them.
 */
import { isIP } from "node:net";

/** `host:port`, `[v6]:port` or `:port` (all interfaces); the config schema checked its form. */
export function parseAddress(address: string): { hostname: string; port: number } {
  const index = address.lastIndexOf(":");
  const hostname = address.slice(0, index).replace(/^\[(.*)\]$/, "$1") || "0.0.0.0";
  return { hostname, port: Number(address.slice(index + 1)) };
}

/** The base URL of a server listening on `hostname:port` (an IPv6 host in brackets, as URLs need). */
export function listenUrl(hostname: string, port: number): string {
  return `http://${hostname.includes(":") ? `[${hostname}]` : hostname}:${port}`;
}

/**
 * The URL the gateway is reached at where it listens (localhost when it listens on every
 * interface): public_url when none is written. Null for a port of 0, chosen by the system later.
 */
export function urlWhereListening(listen: string): string | null {
  const { hostname, port } = parseAddress(listen);
  if (port === 0 || port > 65_535) return null;
  return reachableUrl(hostname, port);
}

/** The URL a server listening on `hostname:port` is reached at (localhost when it listens on every interface). */
export function reachableUrl(hostname: string, port: number): string {
  return listenUrl(hostname === "0.0.0.0" || hostname === "::" ? "localhost" : hostname, port);
}

/** Runs `listen`; a failure (a port in use) is rethrown naming the key, e.g. `server.listen = "…": …`. */
export function listenNaming<T>(key: string, address: string, listen: () => T): T {
  try {
    return listen();
  } catch (err) {
    const { hostname } = parseAddress(address);
    // A name that does not resolve fails as EINVAL or ENOENT ("no such file or directory"), which
    // says nothing of the name: said in its place.
    const unresolved = isIP(hostname) === 0 && ["EINVAL", "ENOENT", "EADDRNOTAVAIL"].includes((err as { code?: string })?.code ?? "");
    const why = unresolved ? `the host name "${hostname}" does not resolve to an address of this machine` : ((err as Error)?.message ?? String(err));
    throw new Error(`${key} = "${address}": ${why}`);
  }
}

/** Stops accepting and waits up to `graceMs` for requests in flight, then cuts them; false if it had to. */
export async function stopWithin(server: { stop(closeActive?: boolean): Promise<void> }, graceMs: number): Promise<boolean> {
  const drained = await Promise.race([server.stop(false).then(() => true), Bun.sleep(graceMs).then(() => false)]);
  if (!drained) await server.stop(true);
  return drained;
}
