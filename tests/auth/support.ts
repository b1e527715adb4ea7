/**
 * In-process app with the real identities (gate, auth routes, limiter, meter) over an in-memory
 * database, a mock upstream serving a free and a paid model, and an injected clock.
 */
import type { createApp } from "../../src/app";
import type { AppDeps } from "../../src/deps";
import type { RequestRecord } from "../../src/requests/record";
import { composeTestApp } from "../support/app";
import { createIdentityState, gateFor, type Identities, type IdentitiesInput } from "../../src/auth/identities";
import { authRoutes } from "../../src/auth/routes";
import { createUser, type User } from "../../src/auth/users";
import { createApiKey } from "../../src/auth/apikey";
import type { PolicyChange } from "../../src/auth/key-policy";
import { createSession } from "../../src/auth/session";
import { grantCredits } from "../../src/credits/ledger";
import { MIN_COMPLETION_TOKENS } from "../../src/credits/reservation";
import { startMockUpstream, type MockUpstream } from "../support/mock-upstream";

/** Paid model price: 10 micro-credits a prompt token, 20 a completion token. */
export const PAID_PRICE = { prompt: 10, completion: 20 };

export interface AuthTestApp {
  app: ReturnType<typeof createApp>;
  deps: AppDeps;
  identities: Identities;
  upstream: MockUpstream;
  records: RequestRecord[];
  clock: { now: number; advance(ms: number): void };
  request(path: string, init?: RequestInit): Promise<Response>;
  chat(body: unknown, headers?: Record<string, string>): Promise<Response>;
  user(email: string, options?: { password?: string; isAdmin?: boolean }): Promise<User>;
  key(userId: number, options?: { expiresAt?: number } & PolicyChange): Promise<string>;
  session(userId: number): Promise<string>;
  close(): void;
}

function modelsConfig(upstreamUrl: string): Record<string, unknown> {
  return {
    upstreams: [{ name: "mock", base_url: upstreamUrl }],
    models: [
      { id: "free-model", targets: [{ upstream: "mock", model: "mock-small" }], free: true },
      { id: "paid-model", targets: [{ upstream: "mock", model: "mock-large" }], price: PAID_PRICE },
    ],
  };
}

/** The same two models as TOML, for a spawned binary (tests/support/binary.ts). */
export function modelsToml(upstreamUrl: string): string {
  return `
[[upstreams]]
name = "mock"
base_url = "${upstreamUrl}"

[[models]]
id = "paid-model"
targets = [{ upstream = "mock", model = "mock-large" }]
price = { prompt = ${PAID_PRICE.prompt}, completion = ${PAID_PRICE.completion} }

[[models]]
id = "free-model"
free = true
targets = [{ upstream = "mock", model = "mock-small" }]
`;
}

/** The gate, the auth controller and the in-memory parts at once, for one config that never changes (serve builds them apart). */
export function buildIdentities(input: IdentitiesInput): Identities {
  const state = createIdentityState({ ...input, config: () => input.config });
  const { db, config, now } = input;
  return {
    gate: gateFor(state, input),
    routes: authRoutes({ db, config, now, throttle: state.throttle }),
    limiter: state.limiter,
    meter: state.meter,
    close: state.close,
  };
}

export function buildAuthApp(raw: Record<string, unknown> = {}): AuthTestApp {
  const upstream = startMockUpstream();
  const clock = {
    now: Date.UTC(2026, 5, 16, 12),
    advance(ms: number) {
      clock.now += ms;
    },
  };
  const now = () => clock.now;
  const composed = composeTestApp({ ...modelsConfig(upstream.url), ...raw }, { now, identities: buildIdentities });
  const { app, deps, records, closeDb } = composed;
  const identities = composed.identities!;
  const { config, db } = deps;
  // Called as a browser is unless the test says otherwise: the auth routes answer pages (303) to a
  // caller whose Accept names text/html, JSON to the rest.
  const request = (path: string, init?: RequestInit) => {
    const headers = new Headers(init?.headers);
    if (!headers.has("accept")) headers.set("accept", BROWSER_ACCEPT);
    return app.handle(new Request(`http://localhost${path}`, { ...init, headers }));
  };
  return {
    app,
    deps,
    identities,
    upstream,
    records,
    clock,
    request,
    chat: (body, headers = {}) =>
      request("/v1/chat/completions", {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: typeof body === "string" ? body : JSON.stringify(body),
      }),
    async user(email, options = {}) {
      const created = await createUser(db, { email, ...options });
      if ("error" in created) throw new Error(created.error);
      return created;
    },
    key: async (userId, { expiresAt, ...policy } = {}) => (await createApiKey(db, { userId, name: "test", now: clock.now, expiresAt, policy })).key,
    session: async (userId) => (await createSession(db, { userId, now: clock.now, durationMs: config.auth.session_days * 86_400_000 })).token,
    close() {
      identities.close();
      upstream.stop();
      closeDb();
    },
  };
}

export const HELLO = { model: "paid-model", messages: [{ role: "user", content: "Hello" }] };

/** Mock upstream usage for HELLO: prompt = JSON of the messages / 4, completion = 6 words. */
export const HELLO_USAGE = { prompt: JSON.stringify(HELLO.messages).length >> 2, completion: 6 };
export const HELLO_COST = HELLO_USAGE.prompt * PAID_PRICE.prompt + HELLO_USAGE.completion * PAID_PRICE.completion;

/** The least balance a paid request with this body is served on: its prompt estimate (bytes / 4) and MIN_COMPLETION_TOKENS. */
export function leastToServe(body: unknown = HELLO): number {
  return Math.ceil(JSON.stringify(body).length / 4) * PAID_PRICE.prompt + MIN_COMPLETION_TOKENS * PAID_PRICE.completion;
}

/** A new user granted `micro` credits (none for 0) and an API key: a paying caller. */
export async function payingUser(t: AuthTestApp, micro: number): Promise<{ userId: number; auth: Record<string, string> }> {
  const user = await t.user(`payer${Math.random()}@example.com`);
  if (micro > 0) await grantCredits(t.deps.db, { userId: user.id, micro, now: t.clock.now - 1 });
  return { userId: user.id, auth: { authorization: `Bearer ${await t.key(user.id)}` } };
}

/** A response body parsed as JSON, typed loosely for assertions. */
/** What a browser sends with a navigation or a form post. */
export const BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

export async function jsonOf(response: Response): Promise<any> {
  return response.json();
}
