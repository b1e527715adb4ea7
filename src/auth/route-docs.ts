/**
 * The OpenAPI description of the sign-in routes (./routes.ts), apart from the handlers: what each
 * takes and answers. Forms and JSON are both accepted; a caller whose Accept does not name
 * text/html (or names application/json) gets JSON, a browser a 303 back to a page.
 */
import type { OpenAPIV3 } from "openapi-types";
import { errorDoc, formBodyDoc, jsonDoc, redirectDoc } from "../swagger";

type Detail = Partial<OpenAPIV3.OperationObject>;

const SIGNED_IN = {
  200: jsonDoc("Signed in (a caller whose Accept does not ask for HTML: curl, SDKs, this page); the session cookie is set"),
  303: redirectDoc("Signed in (a browser's form post, Accept names text/html): to `next` or the dashboard; or back to the form with the refusal"),
  400: errorDoc("A field is missing or invalid"),
  403: errorDoc("Refused by policy (sign-up closed or restricted, account disabled) or by the Origin check"),
  429: errorDoc("Too many attempts from this address or for this account; Retry-After says when"),
};

const tags = ["auth"];

export const AUTH_DOCS = {
  providers: {
    tags,
    summary: "The sign-in methods this server offers",
    responses: { 200: jsonDoc("password, github, google (booleans) and the sign-up policy") },
  },
  me: {
    tags,
    summary: "The signed-in user",
    security: [{ session: [] }],
    responses: { 200: jsonDoc("The user and the session's expiry"), 401: errorDoc("No valid session") },
  },
  signup: {
    tags,
    summary: "Create an account with email and password, and sign in",
    requestBody: formBodyDoc({ email: "Email address", password: "At least 8 characters", next: "A path on this server to go to afterwards (forms)" }, [
      "email",
      "password",
    ]),
    responses: SIGNED_IN,
  },
  login: {
    tags,
    summary: "Sign in with email and password",
    requestBody: formBodyDoc({ email: "Email address", password: "Password", next: "A path on this server to go to afterwards (forms)" }, [
      "email",
      "password",
    ]),
    responses: { ...SIGNED_IN, 401: errorDoc("Incorrect email or password") },
  },
  logout: {
    tags,
    summary: "Sign out: ends the session",
    responses: {
      200: jsonDoc("Signed out (JSON clients)"),
      303: redirectDoc("Signed out (forms): to the dashboard"),
      403: errorDoc("Refused by the Origin check"),
    },
  },
  setup: {
    tags,
    summary: "Create the first administrator with the one-time setup link's token",
    requestBody: formBodyDoc({ token: "The token of the setup link printed at first start", email: "Email address", password: "At least 8 characters" }, [
      "token",
      "email",
      "password",
    ]),
    responses: SIGNED_IN,
  },
  grantCredits: {
    tags: ["admin"],
    summary: "Grant credits to a user (administrators)",
    security: [{ session: [] }],
    requestBody: formBodyDoc({ email: "The user's email", amount: 'Credits, up to 6 decimals ("12.50")', note: "Shown in the ledger" }, ["email", "amount"]),
    responses: {
      200: jsonDoc("The grant and the new balance"),
      400: errorDoc("A missing user or an invalid amount"),
      401: errorDoc("No valid session"),
      403: errorDoc("Not an administrator, or refused by the Origin check"),
      404: errorDoc("No user with that email"),
    },
  },
  oauthStart: {
    tags,
    summary: "Sign in with the provider: redirects to it",
    responses: { 302: redirectDoc("To the provider's consent page"), 404: errorDoc("The provider is not configured") },
  },
  oauthCallback: {
    tags,
    summary: "Where the provider sends the browser back",
    responses: {
      303: redirectDoc("A browser: signed in, to the dashboard; or to the sign-in page with the refusal"),
      400: errorDoc("Not a browser: the state does not match, or the provider reported an error"),
      403: errorDoc("Not a browser: refused by policy (sign-up closed or restricted, account disabled, unverified email)"),
      502: errorDoc("Not a browser: the provider could not complete the sign-in"),
    },
  },
} satisfies Record<string, Detail>;
