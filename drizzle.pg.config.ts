import { defineConfig } from "drizzle-kit";

/** Postgres migrations (`[database] url`), generated from src/db/schema-pg.ts beside drizzle/'s SQLite ones. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema-pg.ts",
  out: "./drizzle/pg",
});
