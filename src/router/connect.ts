/**
 * The connect timeout. Bun's fetch has no separate connect timeout, so before sending to an
 * upstream that may have no pooled connection left (not heard from recently), the gateway opens
 * and closes one TCP connection to its host and port, bounded by `connect_timeout_ms`. A host that
 * is down or black-holed is then given up on in `connect_timeout_ms`, not `first_byte_timeout_ms`.
 */
export type Reachability = "ok" | "refused" | "unresolved" | "timeout";

/** A failed connect's error says the host name did not resolve (getaddrinfo), not that the host refused. */
export function unresolved(err: unknown): boolean {
  const { code, syscall } = (err ?? {}) as { code?: unknown; syscall?: unknown };
  return syscall === "getaddrinfo" || code === "ENOTFOUND" || code === "EAI_AGAIN";
}

function failed(err: unknown): Reachability {
  return unresolved(err) ? "unresolved" : "refused";
}

export function checkConnect(hostname: string, port: number, timeoutMs: number): Promise<Reachability> {
  return new Promise<Reachability>((resolve) => {
    let settled = false;
    const settle = (result: Reachability): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const timer = setTimeout(() => settle("timeout"), timeoutMs);
    Bun.connect({
      hostname,
      port,
      socket: {
        open(socket) {
          settle("ok");
          socket.end();
        },
        data() {},
        error(_socket, err) {
          settle(failed(err));
        },
        connectError(_socket, err) {
          settle(failed(err));
        },
      },
    }).then(
      (socket) => {
        // Connected after the deadline: close the late socket.
        if (settled) socket.end();
      },
      (err: unknown) => settle(failed(err)),
    );
  });
}
