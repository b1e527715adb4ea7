/**
 * What `config check` reaches beyond the file: the Postgres database of `[database] url` (its
 * server's version and the schema's migration state, read without changing anything) and the
 * Redis of `[cluster] redis_url` (a PING). Both URLs are secrets: every line and error names
 * where they point (host:port/database, redis://host:port), never the URL or its password.
 */
import type { Config } from "../config/schema";

const CONNECT_TIMEOUT_S = 5;

/** The lines `config check` prints for what it reached; throws naming the first it cannot. */
export async function checkConnections(config: Config): Promise<string[]> {
  const lines: string[] = [];
  if (config.database.url !== undefined) lines.push(await checkPostgres(config.database.url));
  if (config.cluster.redis_url !== undefined) lines.push(await checkRedis(config.cluster.redis_url, config.cluster.redis_timeout_ms));
  return lines;
}

async function checkPostgres(url: string): Promise<string> {
  const { SQL } = await import("bun");
  const { describePostgresUrl } = await import("../db/where");
  const { readSchemaState } = await import("../db/schema-state");
  const where = describePostgresUrl(url);
  const sql = new SQL({ url, max: 1, connectionTimeout: CONNECT_TIMEOUT_S });
  try {
    const [{ server_version: version }] = (await sql`SHOW server_version`) as { server_version: string }[];
    const state = await readSchemaState(sql);
    return `# database.url: connected to PostgreSQL ${version} at ${where}; ${schemaText(state)}`;
  } catch (err) {
    throw new Error(`database.url: cannot use the Postgres database at ${where} (${reason(err, url)})`);
  } finally {
    await sql.close();
  }
}

function schemaText(state: { applied: number; latest: string; schema: string }): string {
  if (state.schema === "empty") return `no migrations applied yet (serve or \`modelgate migrate\` applies this release's, up to ${state.latest})`;
  if (state.schema === "newer") return `${state.applied} migrations applied, by a newer release than this one (up to ${state.latest}): serve refuses it`;
  if (state.schema === "behind")
    return `${state.applied} migrations applied; this release's up to ${state.latest} are applied by serve or \`modelgate migrate\``;
  return `${state.applied} migrations applied, up to this release's ${state.latest}`;
}

async function checkRedis(url: string, timeoutMs: number): Promise<string> {
  const { RedisClient } = await import("bun");
  const { describeRedisUrl } = await import("../cluster/redis");
  const where = describeRedisUrl(url);
  const client = new RedisClient(url, { autoReconnect: false, enableOfflineQueue: false, connectionTimeout: timeoutMs });
  try {
    await client.connect();
    await client.send("PING", []);
    return `# cluster.redis_url: connected to Redis at ${where}`;
  } catch (err) {
    throw new Error(`cluster.redis_url: cannot reach Redis at ${where} within ${timeoutMs} ms (${reason(err, url)})`);
  } finally {
    client.close();
  }
}

/** The client's reason, with the URL and its password taken out should a client ever quote them. */
function reason(err: unknown, url: string): string {
  let text = String((err as Error)?.message ?? err).split("\n")[0];
  const password = URL.parse(url)?.password;
  for (const secret of [url, password ? decodeURIComponent(password) : "", password ?? ""]) if (secret) text = text.replaceAll(secret, "<redacted>");
  return text;
}
