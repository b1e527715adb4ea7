/**
 * The dashboard's usage downloads and request log: GET /dashboard/usage.csv (the usage export of
 * src/credits/usage-export.ts, streamed) and GET /dashboard/requests (one page of the request log).
 * A user sees their own requests; an administrator sees everyone's with `scope=all`. Filters
 * come from the query string: key, model, endpoint, status, from and to (UTC days, `to` inclusive).
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { listApiKeys } from "../auth/apikey";
import { usageChunks } from "../credits/usage-export";
import type { Html } from "./html";
import type { NavKey, PageOptions, PageUser } from "./layout";
import { requestsPage } from "./pages/requests";
import { REQUEST_LOG_PAGE, requestLogPage, type RequestLogFilter } from "./request-log-query";

interface Signed {
  user: PageUser;
}

export interface UsageRoutesDeps<G extends Signed> {
  deps: AppDeps;
  guard(request: Request): Promise<G | Response>;
  page(g: G, options: Omit<PageOptions, "user" | "csrf"> & { active?: NavKey }, body: Html): Response;
}

const DAY_MS = 86_400_000;
const FILTER_KEYS = ["scope", "key", "model", "endpoint", "status", "from", "to"] as const;

/** A `YYYY-MM-DD` day's start (UTC), or undefined. */
function dayStart(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return undefined;
  const ms = Date.parse(`${text}T00:00:00Z`);
  return Number.isNaN(ms) ? undefined : ms;
}

function filterOf(user: PageUser, query: Record<string, string | undefined>): RequestLogFilter {
  const to = dayStart(query.to);
  return {
    userId: user.isAdmin && query.scope === "all" ? undefined : user.id,
    keyId: query.key || undefined,
    model: query.model || undefined,
    endpoint: query.endpoint || undefined,
    status: query.status || undefined,
    from: dayStart(query.from),
    to: to === undefined ? undefined : to + DAY_MS,
  };
}

/** Only the filter's own parameters, as strings. */
function typed(query: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of FILTER_KEYS) if (typeof query[key] === "string" && query[key] !== "") out[key] = (query[key] as string).slice(0, 200);
  return out;
}

export function usageRoutes<G extends Signed>(options: UsageRoutesDeps<G>) {
  const { deps, guard, page } = options;
  const hidden = { detail: { hide: true } };
  return new Elysia({ name: "modelgate.dashboard.usage" })
    .get(
      "/dashboard/usage.csv",
      async ({ request, query }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        const filter = filterOf(g.user, typed(query));
        const chunks = usageChunks(deps.db, filter, "csv");
        const encoder = new TextEncoder();
        // Pulled a chunk at a time as the client reads: a large export is never whole in memory.
        const body = new ReadableStream<Uint8Array>({
          async pull(controller) {
            const next = await chunks.next();
            if (next.done) controller.close();
            else controller.enqueue(encoder.encode(next.value));
          },
          async cancel() {
            await chunks.return(undefined);
          },
        });
        const day = new Date(deps.now()).toISOString().slice(0, 10);
        return new Response(body, {
          headers: {
            "content-type": "text/csv; charset=utf-8",
            "content-disposition": `attachment; filename="modelgate-usage-${day}.csv"`,
            "cache-control": "no-store",
          },
        });
      },
      hidden,
    )
    .get(
      "/dashboard/requests",
      async ({ request, query }) => {
        const g = await guard(request);
        if (g instanceof Response) return g;
        const q = typed(query);
        const before = typeof query.before === "string" && /^\d{1,15}$/.test(query.before) ? Number(query.before) : undefined;
        const filter = { ...filterOf(g.user, q), before };
        const rows = await requestLogPage(deps.db, filter);
        const more = rows.length > REQUEST_LOG_PAGE;
        const shown = more ? rows.slice(0, REQUEST_LOG_PAGE) : rows;
        const keys = await listApiKeys(deps.db, { userId: filter.userId });
        const view = {
          rows: shown,
          nextBefore: more ? shown[shown.length - 1].id : null,
          query: q,
          keys,
          showUser: filter.userId === undefined,
          isAdmin: g.user.isAdmin,
        };
        return page(g, { title: "Request log", active: "requests" }, requestsPage(view));
      },
      hidden,
    );
}
