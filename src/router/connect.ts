/**
 * The connect timeout. Bun's fetch has no separate connect timeout, so before sending to an
 * upstream that may have no pooled connection left (not heard from recently), the gateway opens
 * and closes one TCP connection to its host and port, bounded by `connect_timeout_ms`. A host that
 * is down or black-holed is then given up on in `connect_timeout_ms`, not `first_byte_timeout_ms`.
 */
export type Reachability = "ok" | "refused" | "timeout";

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
        error() {
          settle("refused");
        },
        connectError() {
          settle("refused");
        },
      },
    }).then(
      (socket) => {
        // Connected after the deadline: close the late socket.
        if (settled) socket.end();
      },
      () => settle("refused"),
    );
  });
}
