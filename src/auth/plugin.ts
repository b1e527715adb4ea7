/**
 * The auth plugin for browser-facing routes: one named Elysia instance (registered once per app
 * however many controllers use it) with two macros routes opt into:
 *   { session: true } -> resolves `user` (a SessionUser) from the mg_session cookie, else 401
 *                        invalid_session; on POST/PUT/PATCH/DELETE the Origin must be ours (403)
 *   { admin: true }   -> the same, then 403 forbidden unless the user is an administrator
 * Pages that render for signed-out visitors too read the session without refusing (the dashboard's
 * `sessionUser`, src/dashboard/accounts.ts).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { GatewayError } from "../errors";
import { createSessionValidator, type SessionCheck, type SessionUser } from "./session";
import { readSessionCookie } from "./cookies";
import { originAllowed } from "./origin-policy";

export type AuthPluginDeps = Pick<AppDeps, "db" | "config" | "now">;

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

export function authPlugin(deps: AuthPluginDeps) {
  const validate = createSessionValidator(deps.db, { now: deps.now, durationMs: deps.config.auth.session_days * 86_400_000 });
  /** The session's user, or a thrown 401/403 (see the header); synchronous on SQLite, a promise on Postgres. */
  function requireSession(request: Request, options: { admin: boolean }): { user: SessionUser } | Promise<{ user: SessionUser }> {
    const token = readSessionCookie(request);
    if (token === null)
      throw new GatewayError("invalid_session", "Sign in first: this route needs a dashboard session (an API key does not open it; scripts use the CLI)");
    const check = validate(token);
    const admitted = (c: SessionCheck): { user: SessionUser } => {
      if (!c.ok) throw new GatewayError("invalid_session", c.message);
      if (!SAFE_METHODS.has(request.method) && !originAllowed(request, deps.config.server.public_url)) {
        throw new GatewayError("forbidden", "Cross-origin requests made with a session cookie are refused");
      }
      if (options.admin && !c.session.isAdmin) throw new GatewayError("forbidden", "This needs an administrator account");
      return { user: c.session };
    };
    return check instanceof Promise ? check.then(admitted) : admitted(check);
  }
  return new Elysia({ name: "modelgate.auth" }).error({ GatewayError }).macro({
    session: {
      resolve: ({ request }) => requireSession(request, { admin: false }),
    },
    admin: {
      resolve: ({ request }) => requireSession(request, { admin: true }),
    },
  });
}
