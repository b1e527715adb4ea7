/**
 * Waits for a condition that another process brings about (a CLI change reaching the running
 * server): polls `probe` every `everyMs` until it holds or `timeoutMs` has passed, and returns
 * whether it held. A bound on correctness, not a timing: the margin is generous.
 */
export async function eventually(probe: () => boolean | Promise<boolean>, timeoutMs = 2_000, everyMs = 10): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await Bun.sleep(everyMs);
  }
}
