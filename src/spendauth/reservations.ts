/**
 * What this gateway has promised from each SpendAuth credit account and the chain has not deducted
 * yet, held in memory per commitment and nonce: admission checks a new authorization against the
 * balance left, and against the order the contract takes nonces in. Rebuilt at start-up from the
 * pending settlement rows (./settlements.ts loadReservations).
 */

/**
 * Amounts this gateway has admitted for a commitment that the chain has not deducted yet (served
 * but not yet authorized on-chain, or still being served). The on-chain balance minus these must
 * cover a new authorization, so concurrent authorizations cannot overspend one account. Entries
 * stop counting once their authorization expires, since it can no longer be settled.
 */
export class Reservations {
  private byCommitment = new Map<string, Map<string, { amount: bigint; expiryS: number }>>();

  add(commitment: string, nonce: string, amount: bigint, expiryS: number): void {
    let entries = this.byCommitment.get(commitment);
    if (!entries) this.byCommitment.set(commitment, (entries = new Map()));
    entries.set(nonce, { amount, expiryS });
  }

  remove(commitment: string, nonce: string): void {
    const entries = this.byCommitment.get(commitment);
    if (!entries) return;
    entries.delete(nonce);
    if (entries.size === 0) this.byCommitment.delete(commitment);
  }

  /** Drops every expired entry (run periodically so idle commitments do not hold memory). */
  sweep(nowMs: number): void {
    for (const commitment of [...this.byCommitment.keys()]) {
      this.total(commitment, nowMs);
      if (this.byCommitment.get(commitment)?.size === 0) this.byCommitment.delete(commitment);
    }
  }

  /** Whether an authorization with a nonce above `nonce` is held for `commitment`. */
  holdsAfter(commitment: string, nonce: bigint): boolean {
    for (const held of this.byCommitment.get(commitment)?.keys() ?? []) if (BigInt(held) > nonce) return true;
    return false;
  }

  /** The first nonce from `from` up that this gateway holds no authorization for. */
  nextFree(commitment: string, from: bigint): bigint {
    const entries = this.byCommitment.get(commitment);
    let next = from;
    while (entries?.has(next.toString())) next += 1n;
    return next;
  }

  total(commitment: string, nowMs: number): bigint {
    const entries = this.byCommitment.get(commitment);
    if (!entries) return 0n;
    const nowS = Math.floor(nowMs / 1000);
    let sum = 0n;
    for (const [nonce, entry] of entries) {
      if (entry.expiryS < nowS) entries.delete(nonce);
      else sum += entry.amount;
    }
    return sum;
  }
}
