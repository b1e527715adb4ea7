/** The column helpers every area of the Postgres schema shares (./index.ts): see its header for the types. */
import { sql } from "drizzle-orm";
import { bigint, customType } from "drizzle-orm/pg-core";

export const now = sql`((extract(epoch from clock_timestamp()) * 1000)::bigint)`;

/** A 64-bit integer read back as a JavaScript number (every value modelgate keeps fits in 2^53). */
export function int(name: string) {
  return bigint(name, { mode: "number" });
}

export function serialId(name: string) {
  return int(name).primaryKey().generatedByDefaultAsIdentity();
}

export const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => "bytea",
});
