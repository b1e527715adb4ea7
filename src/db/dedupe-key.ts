/**
 * A webhook call's dedupe key as Postgres holds it. SQLite's keys are `path NUL delivery-id`;
 * Postgres text cannot hold NUL, so a space stands there. Still one key per pair: an endpoint path
 * holds no space (src/webhooks/config.ts), so the first space ends it. Used by the Postgres outbox
 * and by `migrate --from-sqlite`, so keys copied over still match the deliveries sent again.
 */
export function postgresDedupeKey(key: string): string {
  return key.replace("\u0000", " ");
}
