/**
 * A singleton's lease (the `leases` table): the process that holds a name runs the work (route
 * discovery, pruning, the settlement worker, a job's consumer); the others wait. A holder renews
 * well before `expires_at`; a holder that died stops renewing and another takes the name once it
 * has expired. One statement decides, on either engine: an insert, or an update of a row that has
 * expired or is already ours.
 */
import { hostname } from "node:os";
import { sql } from "drizzle-orm";
import type { Db } from "./client";
import { tablesOf } from "./engine";

export interface Lease {
  /** True while this holder has the name until at least now + ttlMs; renews or takes it. */
  acquire(): Promise<boolean>;
  /** Gives the name up at once (a clean stop), if this holder has it. */
  release(): Promise<void>;
}

export interface LeaseOptions {
  /** This process, unique among those sharing the database. */
  holder: string;
  ttlMs: number;
  now: () => number;
}

export function createLease(db: Db, name: string, options: LeaseOptions): Lease {
  const { leases } = tablesOf(db);
  return {
    async acquire() {
      const now = options.now();
      const rows = await db
        .insert(leases)
        .values({ name, holder: options.holder, expiresAt: now + options.ttlMs })
        .onConflictDoUpdate({
          target: leases.name,
          set: { holder: options.holder, expiresAt: now + options.ttlMs },
          setWhere: sql`${leases.expiresAt} < ${now} OR ${leases.holder} = ${options.holder}`,
        })
        .returning({ holder: leases.holder });
      return rows.length === 1;
    },
    async release() {
      await db.delete(leases).where(sql`${leases.name} = ${name} AND ${leases.holder} = ${options.holder}`);
    },
  };
}

/** A holder name for this process: host, pid and a random part (a restarted pid is another holder). */
export function processHolder(): string {
  return `${hostname()}:${process.pid}:${crypto.randomUUID().slice(0, 8)}`;
}
