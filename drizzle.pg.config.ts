import { defineConfig } from "drizzle-kit";

/** Postgres migrations (`[database] url`), generated from src/db/schema-pg/ beside drizzle/'s SQLite ones. */
export default defineConfig({
  dialect: "postgresql",
  schema: "./src/db/schema-pg/index.ts",
  out: "./drizzle/pg",
});
