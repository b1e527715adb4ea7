/**
 * The kinds of caller the gateway tells apart. A shared basic: identities (auth/) establish one
 * per request, and the request record (requests/record.ts), the logs and the metrics carry it,
 * so it lives below both rather than in auth/.
 */

/** `job`: a call the gateway makes for itself (a triage job), as a user or as its built-in service identity. */
export type IdentityKind = "api_key" | "session" | "spend_auth" | "anonymous" | "job";
