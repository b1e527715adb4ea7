/**
 * blackHole(): a loopback port whose connects never complete, for the HTTP/1.1 client's connect
 * timeout tests. Built on libc through bun:ffi; undone by the raw upstream's cleanUp().
 */
import { expect } from "bun:test";
import { dlopen, FFIType, ptr } from "bun:ffi";
import { onCleanup } from "./raw-upstream";

/**
 * A listening socket that never accepts, its accept queue already full, so a further connect
 * hangs in SYN_SENT: a loopback connect timeout without depending on the network. (The usual
 * non-routable address, 10.255.255.1:81, is no good here: this sandbox intercepts outbound
 * connections and accepts them at once, so the client gets a connection and an answer.)
 */
export async function blackHole(): Promise<number> {
  const libc = dlopen(process.platform === "darwin" ? "libc.dylib" : "libc.so.6", {
    socket: { args: [FFIType.i32, FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    bind: { args: [FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    listen: { args: [FFIType.i32, FFIType.i32], returns: FFIType.i32 },
    getsockname: { args: [FFIType.i32, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    close: { args: [FFIType.i32], returns: FFIType.i32 },
  });
  const fd = libc.symbols.socket(2 /* AF_INET */, 1 /* SOCK_STREAM */, 0);
  expect(fd).toBeGreaterThanOrEqual(0);
  const address = new Uint8Array(16); // struct sockaddr_in: family, port (big-endian), address
  if (process.platform === "darwin")
    address.set([16, 2]); // sin_len, sin_family
  else address[0] = 2; // sin_family, little-endian
  address.set([127, 0, 0, 1], 4);
  expect(libc.symbols.bind(fd, ptr(address), 16)).toBe(0);
  expect(libc.symbols.listen(fd, 0)).toBe(0); // an accept queue of one
  const size = new Uint32Array([16]);
  expect(libc.symbols.getsockname(fd, ptr(address), ptr(size))).toBe(0);
  const port = (address[2] << 8) | address[3];
  const filler = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
  onCleanup(() => {
    filler.terminate();
    libc.symbols.close(fd);
    libc.close();
  });
  return port;
}
