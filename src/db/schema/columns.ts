/** The column helpers every area of the schema shares (./index.ts). */
import { sql } from "drizzle-orm";

export const now = sql`(CAST(unixepoch('subsec') * 1000 AS INTEGER))`;
