/**
 * The tables of src/db/schema/ for Postgres (`[database] url`), one file per area as there. The two
 * describe the same tables, column for column, index for index; tests/db/schema-pg.test.ts fails
 * when they differ.
 * Types map one to one: SQLite's integer is bigint here (milliseconds and micro-credits outgrow
 * 32 bits), its boolean integer is boolean, its blob is bytea, AUTOINCREMENT is an identity
 * column (a sequence, so a call_id is never reused).
 * After editing, run `make migrations NAME=…` (regenerates drizzle/pg/ and the embedded copy).
 */
export * from "./accounts";
export * from "./credits";
export * from "./requests";
export * from "./spendauth";
export * from "./webhooks";
export * from "./routing";
export * from "./triage";
export * from "./coordination";
