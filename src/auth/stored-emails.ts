/**
 * Emails stored before they were kept in ./email.ts's form, put in it: normalizeStoredEmails(db)
 * rewrites each such row of `users` and returns the accounts whose stored email cannot be put in
 * its lookup form (for the caller to report). It finishes before it returns on SQLite (the CLI
 * runs it as it opens the file) and returns a promise on Postgres.
 */
import { eq } from "drizzle-orm";
import type { Db } from "../db/client";
import { isUniqueViolation, postgresOf, sqliteOf, tablesOf } from "../db/engine";
import { normalizeEmail } from "./email";

/**
 * Rewrites emails stored before they were kept in NFKC form (older releases only trimmed and
 * lower-cased them, so `ｆｕｌｌ@example.com` could no longer be found, or found another account).
 * A row is left as it is when its form belongs to another account or is no longer a valid
 * address; those are returned, for the caller to report. A scan of `users` that writes nothing
 * once every row is in form, so it runs at every open.
 */
export function normalizeStoredEmails(db: Db): StoredEmail[] | Promise<StoredEmail[]> {
  if (postgresOf(db) === null) {
    const sqlite = sqliteOf(db, "normalizeStoredEmails");
    const { rewrites, stuck } = planEmailRewrites(sqlite.query<StoredEmail, []>("SELECT id, email FROM users ORDER BY id").all());
    const update = sqlite.query<unknown, [string, number]>("UPDATE users SET email = ? WHERE id = ?");
    for (const { row, email } of rewrites) {
      try {
        update.run(email, row.id);
      } catch (err) {
        stuck.push(refusedRewrite(err, row));
      }
    }
    return byId(stuck);
  }
  return (async () => {
    const { users } = tablesOf(db);
    const { rewrites, stuck } = planEmailRewrites(await db.select({ id: users.id, email: users.email }).from(users).orderBy(users.id));
    for (const { row, email } of rewrites) {
      try {
        await db.update(users).set({ email }).where(eq(users.id, row.id));
      } catch (err) {
        stuck.push(refusedRewrite(err, row));
      }
    }
    return byId(stuck);
  })();
}

export interface StoredEmail {
  id: number;
  email: string;
}

/**
 * Which rows get their email's lookup form, and which are stuck: the form is not an address, or
 * another row holds it (a row rewritten earlier in the scan frees the form it had).
 */
function planEmailRewrites(rows: StoredEmail[]): { rewrites: Array<{ row: StoredEmail; email: string }>; stuck: StoredEmail[] } {
  const held = new Set(rows.map((row) => row.email));
  const rewrites: Array<{ row: StoredEmail; email: string }> = [];
  const stuck: StoredEmail[] = [];
  for (const row of rows) {
    const email = normalizeEmail(row.email);
    if (email === row.email) continue;
    if (email === null || held.has(email)) stuck.push(row);
    else {
      held.delete(row.email);
      held.add(email);
      rewrites.push({ row, email });
    }
  }
  return { rewrites, stuck };
}

/** A rewrite the unique email refused (an account signed up with that form since the scan) leaves its row stuck. */
function refusedRewrite(err: unknown, row: StoredEmail): StoredEmail {
  if (!isUniqueViolation(err)) throw err;
  return row;
}

function byId(rows: StoredEmail[]): StoredEmail[] {
  return rows.sort((a, b) => a.id - b.id);
}
