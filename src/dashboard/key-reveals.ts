/**
 * A new key's one showing in the dashboard. The form that creates a key is answered with a
 * redirect to `/dashboard/keys?created=ID`, and that page takes the key from here: a reload, or
 * Back to it, finds nothing and shows a notice instead, so no reload ever posts the form again
 * (which made another key). Invariants: a key is held in memory only, between the form's answer
 * and the page's first load, for at most REVEAL_TTL_MS and at most MAX_HELD keys; only the session
 * that created it can take it (bound by the session's CSRF token, a hash of the session token);
 * it is taken at most once; a session has at most MAX_HELD_PER_SESSION waiting, so posting the
 * form in a loop pushes out its own keys before anyone else's.
 */
import { randomBytes } from "node:crypto";

/** Long enough for a slow page load after the redirect; a key not fetched by then is never shown. */
export const REVEAL_TTL_MS = 60_000;
/** A bound on memory should someone post the form in a loop without following the redirects. */
const MAX_HELD = 1_000;
/** Keys one session may have waiting: its loop pushes out its own, never another session's. */
const MAX_HELD_PER_SESSION = 5;

export interface CreatedKey {
  key: string;
  name: string;
}

interface Held extends CreatedKey {
  boundTo: string;
  until: number;
}

export interface KeyReveals {
  /** Holds `created` for the session whose CSRF token is `boundTo`; returns the id for the redirect. */
  hold(boundTo: string, created: CreatedKey): string;
  /** The key held under `id` for that session, removed as it is returned; null when taken, expired or another session's. */
  take(id: string, boundTo: string): CreatedKey | null;
}

export function createKeyReveals(now: () => number): KeyReveals {
  const held = new Map<string, Held>();
  const dropExpired = (at: number): void => {
    // Insertion order is expiry order: stop at the first still alive.
    for (const [id, entry] of held) {
      if (entry.until > at) break;
      held.delete(id);
    }
  };
  return {
    hold(boundTo, created) {
      const at = now();
      dropExpired(at);
      const own = [...held].filter(([, entry]) => entry.boundTo === boundTo);
      if (own.length >= MAX_HELD_PER_SESSION) held.delete(own[0][0]);
      else if (held.size >= MAX_HELD) held.delete(held.keys().next().value!);
      const id = randomBytes(18).toString("base64url");
      held.set(id, { key: created.key, name: created.name, boundTo, until: at + REVEAL_TTL_MS });
      return id;
    },
    take(id, boundTo) {
      const entry = held.get(id);
      if (!entry || entry.boundTo !== boundTo) return null;
      held.delete(id);
      return entry.until > now() ? { key: entry.key, name: entry.name } : null;
    },
  };
}
