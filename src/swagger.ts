/**
 * Swagger UI at /swagger and the generated OpenAPI document at /swagger/json. The UI's script and
 * stylesheet are embedded in the binary and served from /swagger/assets, so it renders air-gapped.
 */
import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import bundlePath from "swagger-ui-dist/swagger-ui-bundle.js" with { type: "file" };
import cssPath from "swagger-ui-dist/swagger-ui.css" with { type: "file" };
import { INTERFACE_VERSION, VERSION } from "./version";

/**
 * The UI's options. The document URL is absolute: the plugin's own is relative ("swagger/json"),
 * which breaks when the page is opened as /swagger/. Its type leaves `url` out, but the plugin
 * spreads these options after its own, so ours wins.
 */
const SWAGGER_UI_OPTIONS = { url: "/swagger/json", cdn: "/swagger/assets/swagger-ui-bundle.js", theme: "/swagger/assets/swagger-ui.css", autoDarkMode: false };
const SWAGGER_UI: Omit<typeof SWAGGER_UI_OPTIONS, "url"> = SWAGGER_UI_OPTIONS;

export function swaggerRoutes() {
  return new Elysia({ name: "modelgate.swagger" })
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
              bearer: { type: "http", scheme: "bearer", bearerFormat: "API_KEY" },
              session: { type: "apiKey", in: "cookie", name: "mg_session" },
              spendAuth: { type: "apiKey", in: "header", name: "X-Payment-Signature" },
            },
          },
        },
      }),
    );
}

function assetResponse(path: string, type: string): Response {
  return new Response(Bun.file(path), {
    headers: { "content-type": type, "cache-control": "public, max-age=86400" },
  });
}
