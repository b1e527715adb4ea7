/** What every area of the schema shares (./index.ts): `now`, the default of a creation time in milliseconds. */
import { sql } from "drizzle-orm";

export const now = sql`(CAST(unixepoch('subsec') * 1000 AS INTEGER))`;
