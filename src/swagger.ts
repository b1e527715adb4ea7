/**
 * Swagger UI at /swagger and the generated OpenAPI document at /swagger/json. The UI's script and
 * stylesheet are embedded in the binary and served from /swagger/assets, so it renders air-gapped.
 * Every operation declares its responses (docResponses): Swagger UI shows a live answer only in an
 * operation's Responses section, so one without any shows nothing after Execute.
 */
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import bundlePath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import cssPath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import type { OpenAPIV3 } from "openapi-types";
import { INTERFACE_VERSION, VERSION } from "./version";

/**
 * The UI's options. The document URL is absolute: the plugin's own is relative ("swagger/json"),
 * which breaks when the page is opened as /swagger/. Its type leaves `url` out, but the plugin
 * spreads these options after its own, so ours wins.
 */
const SWAGGER_UI_OPTIONS = { url: "/swagger/json", cdn: "/swagger/assets/swagger-ui-bundle.js", theme: "/swagger/assets/swagger-ui.css", autoDarkMode: false };
const SWAGGER_UI: Omit<typeof SWAGGER_UI_OPTIONS, "url"> = SWAGGER_UI_OPTIONS;

/** An OpenAPI response whose body is JSON (`schema`: any object unless given). */
export function jsonDoc(description: string, schema: OpenAPIV3.SchemaObject = { type: "object", additionalProperties: true }): OpenAPIV3.ResponseObject {
  return { description, content: { "application/json": { schema } } };
}

/** An OpenAPI response in OpenAI's error shape. */
export function errorDoc(description: string): OpenAPIV3.ResponseObject {
  return { description, content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } } };
}

/** A redirect (a browser's sign-in flow). */
export function redirectDoc(description: string): OpenAPIV3.ResponseObject {
  return { description, headers: { location: { schema: { type: "string" } } } };
}

/** A request body taken as JSON or as a form (the dashboard's forms post without JavaScript too). */
export function formBodyDoc(properties: Record<string, string>, required: string[]): OpenAPIV3.RequestBodyObject {
  const schema: OpenAPIV3.SchemaObject = {
    type: "object",
    required,
    properties: Object.fromEntries(Object.entries(properties).map(([name, description]) => [name, { type: "string", description }])),
  };
  return { required: true, content: { "application/json": { schema }, "application/x-www-form-urlencoded": { schema } } };
}

export function swaggerRoutes() {
  return (
    new Elysia({ name: "modelgate.swagger" })
      // Browsers ask every origin for one; a 404 would be a console error on the Swagger UI page.
      .get("/favicon.ico", () => new Response(null, { status: 204, headers: { "cache-control": "public, max-age=86400" } }), { detail: { hide: true } })
      .get("/swagger/assets/swagger-ui-bundle.js", () => assetResponse(bundlePath, "text/javascript"), { detail: { hide: true } })
      .get("/swagger/assets/swagger-ui.css", () => assetResponse(cssPath, "text/css"), { detail: { hide: true } })
      .use(
        openapi({
          path: "/swagger",
          provider: "swagger-ui",
          swagger: SWAGGER_UI,
          documentation: {
            info: {
              title: "modelgate",
              version: VERSION,
              description: `OpenAI-compatible model gateway. Interface version ${INTERFACE_VERSION}.`,
            },
            components: {
              schemas: {
                Error: {
                  type: "object",
                  description: "OpenAI's error shape",
                  required: ["error"],
                  properties: {
                    error: {
                      type: "object",
                      required: ["message", "type", "param", "code"],
                      properties: { message: { type: "string" }, type: { type: "string" }, param: { type: ["string", "null"] }, code: { type: "string" } },
                    },
                  },
                },
              },
              securitySchemes: {
                bearer: {
                  type: "http",
                  scheme: "bearer",
                  bearerFormat: "API_KEY",
                  description: "An API key (sk-mg-…) from the dashboard or `modelgate key create`",
                },
                anthropicKey: {
                  type: "apiKey",
                  in: "header",
                  name: "x-api-key",
                  description: "The same API key in the header Anthropic's clients send it in (any /v1 model endpoint takes it)",
                },
                session: {
                  type: "apiKey",
                  in: "cookie",
                  name: "mg_session",
                  description:
                    "The dashboard's session cookie. A browser cannot set it from this page: sign in at /dashboard in this browser instead, and its requests carry the cookie",
                },
                spendAuth: {
                  type: "apiKey",
                  in: "header",
                  name: "X-Payment-Signature",
                  description: "A signed SpendAuth payment authorization as JSON (see docs/spendauth.md in the repository)",
                },
                metricsToken: { type: "http", scheme: "bearer", description: "`[metrics] token`, when set" },
              },
            },
          },
        }),
      )
  );
}

function assetResponse(path: string, type: string): Response {
  return new Response(Bun.file(path), {
    headers: { "content-type": type, "cache-control": "public, max-age=86400" },
  });
}
