/**
 * Inserts a batch of rows with few statements: prepared INSERTs of ROWS_PER_STATEMENT rows each,
 * then single-row ones for the rest. One statement of many rows costs about two thirds of as many
 * single-row ones, the binding included. The caller wraps the call in its transaction.
 */
import type { Database } from "bun:sqlite";

const ROWS_PER_STATEMENT = 32;

export type SqlValue = string | number | null;

/**
 * `head` is the statement up to and including VALUES; `valuesOf` appends one row's `columns`
 * values, in the head's column order, to `out`.
 */
export function createBatchInsert<T>(sqlite: Database, head: string, columns: number, valuesOf: (out: SqlValue[], row: T) => void): (rows: T[]) => void {
  const row = `(${Array(columns).fill("?").join(",")})`;
  const one = sqlite.prepare<unknown, SqlValue[]>(head + row);
  const many = sqlite.prepare<unknown, SqlValue[]>(head + Array(ROWS_PER_STATEMENT).fill(row).join(","));
  return (rows) => {
    let i = 0;
    for (; i + ROWS_PER_STATEMENT <= rows.length; i += ROWS_PER_STATEMENT) {
      const values: SqlValue[] = [];
      for (let j = i; j < i + ROWS_PER_STATEMENT; j++) valuesOf(values, rows[j]);
      many.run(...values);
    }
    for (; i < rows.length; i++) {
      const values: SqlValue[] = [];
      valuesOf(values, rows[i]);
      one.run(...values);
    }
  };
}
