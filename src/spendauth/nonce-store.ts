/**
 * What a SpendAuth replay record store does, on either engine: SQLite's in ./nonces.ts, Postgres'
 * in ./nonces-pg.ts. ./nonces.ts says what a record means and when it is released.
 */

/** How a record was taken: a nonce not seen before, or one whose served authorization went dead unauthorized. */
export type Recorded = "new" | "replacing";

export interface NonceRecord {
  commitment: string;
  nonce: string;
  keepUntilMs: number;
}

export interface NonceStore {
  /**
   * Records (commitment, nonce) for an authorization kept until `keepUntilMs`: "new" when it was
   * not seen before; "replacing" when it was last recorded for an authorization whose settlement
   * went dead unauthorized and this one is kept longer (the record now holds this one); null when
   * it is taken (a replay).
   */
  record(commitment: string, nonce: string, keepUntilMs: number): Promise<Recorded | null>;
  /** Each as record() takes it, in one transaction, in order (of two uses of one nonce, the first wins). */
  recordAll(records: NonceRecord[]): Promise<Array<Recorded | null>>;
  /**
   * Gives back a record this admission took, nothing having been served on it: to the
   * authorization its settlement row holds while that one can still pass the time check (a
   * replacement refused; the row retried meanwhile), else deleted.
   */
  release(commitment: string, nonce: string, nowMs: number): Promise<void>;
  /** Deletes records whose authorization can no longer pass the time check; returns how many. */
  prune(nowMs: number): Promise<number>;
  /**
   * At start-up, before serving: deletes records no settlement row claims, and gives records a
   * replacement took back to their dead row (its own row was never written); returns how many.
   */
  forgetUnsettled(): Promise<number>;
}
