/**
 * How logs, errors and /api/status name a Postgres database: its `[database] url` may hold a
 * password, so only host:port/database is ever shown. Kept apart from ./postgres.ts so the CLI
 * can name the database without loading Drizzle's Postgres modules.
 */

/** host:port/database of a postgres:// URL, without its user or password. */
export function describePostgresUrl(url: string): string {
  const parsed = URL.parse(url);
  return parsed === null ? "(an unparsable URL)" : `${parsed.host}${parsed.pathname}`;
}
