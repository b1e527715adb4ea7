// src/db/schema/ (SQLite) and src/db/schema-pg/ (Postgres) describe the same tables: every
// table, column (name, type family, null, default, key), primary key, unique constraint and
// index the one has, the other has too. Editing one without the other fails here.
import { expect, test } from "bun:test";
import { getTableConfig as pgConfig, PgTable } from "drizzle-orm/pg-core";
import { getTableConfig as sqliteConfig, SQLiteTable } from "drizzle-orm/sqlite-core";
import * as pgSchema from "../../src/db/schema-pg";
import * as sqliteSchema from "../../src/db/schema";

interface Shape {
  columns: Record<string, string>;
  primaryKeys: string[];
  indexes: string[];
}

/** SQLite's type names, Postgres's mapped to them (src/db/schema-pg/index.ts's header says how). */
function family(sqlType: string): string {
  const map: Record<string, string> = { bigint: "integer", boolean: "integer", bytea: "blob" };
  return map[sqlType] ?? sqlType;
}

type AnyColumn = { name: string; getSQLType(): string; notNull: boolean; hasDefault: boolean; primary: boolean; isUnique: boolean };

/** A key column's default is left out: SQLite gives every integer primary key one (the rowid). */
function columnShape(c: AnyColumn): string {
  return [
    family(c.getSQLType()),
    c.notNull ? "not null" : "null",
    c.hasDefault && !c.primary ? "default" : "",
    c.primary ? "pk" : "",
    c.isUnique ? "unique" : "",
  ].join(" ");
}

function shapes<T>(
  schema: Record<string, unknown>,
  isTable: (v: unknown) => v is T,
  config: (t: T) => {
    name: string;
    columns: AnyColumn[];
    primaryKeys: { columns: { name: string }[] }[];
    indexes: { config: { name: string; unique: boolean; columns: unknown[] } }[];
  },
): Record<string, Shape> {
  const out: Record<string, Shape> = {};
  for (const value of Object.values(schema)) {
    if (!isTable(value)) continue;
    const c = config(value);
    out[c.name] = {
      columns: Object.fromEntries(c.columns.map((col) => [col.name, columnShape(col)])),
      primaryKeys: c.primaryKeys.map((pk) => pk.columns.map((col) => col.name).join(",")),
      indexes: c.indexes.map(
        (i) => `${i.config.name}${i.config.unique ? " unique" : ""} (${i.config.columns.map((col) => (col as { name: string }).name).join(",")})`,
      ),
    };
  }
  return out;
}

test("the Postgres schema has every table, column and index the SQLite schema has, and nothing else", () => {
  const sqlite = shapes(
    sqliteSchema,
    (v): v is SQLiteTable => v instanceof SQLiteTable,
    (t) => sqliteConfig(t) as never,
  );
  const pg = shapes(
    pgSchema,
    (v): v is PgTable => v instanceof PgTable,
    (t) => pgConfig(t) as never,
  );
  expect(Object.keys(sqlite).length).toBeGreaterThan(10);
  expect(pg).toEqual(sqlite);
});
