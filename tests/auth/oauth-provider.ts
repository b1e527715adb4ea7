/**
 * A loopback stand-in for GitHub's and Google's OAuth endpoints (the only stand-in these tests
 * use besides the model server): /authorize approves at once and redirects back with a code;
 * /token checks the client credentials, the code, the redirect URI and (when the authorization
 * asked for one) the S256 PKCE verifier; the profile endpoints answer for the token's account.
 */
/** RFC 7636 S256: base64url (no padding) of the verifier's SHA-256. */
function s256(verifier: string): string {
  return Bun.SHA256.hash(verifier, "base64url");
}

interface StandInAccount {
  id: string;
  email: string | null;
  verified: boolean;
}

export interface OAuthStandIn {
  url: string;
  /** The account the next approval signs in as. */
  account: StandInAccount;
  tokenRequests: number;
  stop(): void;
}

export function startOAuthStandIn(client: { id: string; secret: string }): OAuthStandIn {
  const codes = new Map<string, { redirect: string; challenge: string | null; account: StandInAccount }>();
  const tokens = new Map<string, StandInAccount>();
  const self: OAuthStandIn = {
    url: "",
    account: { id: "1", email: "someone@example.com", verified: true },
    tokenRequests: 0,
    stop: () => server.stop(true),
  };
  const bearer = (request: Request): StandInAccount | undefined => tokens.get((request.headers.get("authorization") ?? "").replace(/^Bearer /, ""));
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(request) {
      const url = new URL(request.url);
      if (url.pathname === "/authorize") {
        const redirect = url.searchParams.get("redirect_uri")!;
        if (url.searchParams.get("client_id") !== client.id) return new Response("unknown client", { status: 400 });
        const code = crypto.randomUUID();
        codes.set(code, { redirect, challenge: url.searchParams.get("code_challenge"), account: { ...self.account } });
        const back = new URL(redirect);
        back.searchParams.set("code", code);
        back.searchParams.set("state", url.searchParams.get("state")!);
        return Response.redirect(back.toString(), 302);
      }
      if (url.pathname === "/token" && request.method === "POST") {
        self.tokenRequests++;
        const form = new URLSearchParams(await request.text());
        const expected = `Basic ${btoa(`${client.id}:${client.secret}`)}`;
        const grant = codes.get(form.get("code") ?? "");
        if (request.headers.get("authorization") !== expected) return Response.json({ error: "invalid_client" }, { status: 401 });
        if (!grant || grant.redirect !== form.get("redirect_uri")) return Response.json({ error: "invalid_grant" }, { status: 400 });
        if (grant.challenge !== null && s256(form.get("code_verifier") ?? "") !== grant.challenge) {
          return Response.json({ error: "invalid_grant", error_description: "PKCE verification failed" }, { status: 400 });
        }
        codes.delete(form.get("code")!);
        const token = crypto.randomUUID();
        tokens.set(token, grant.account);
        return Response.json({ access_token: token, token_type: "bearer", scope: "" });
      }
      const account = bearer(request);
      if (!account) return Response.json({ message: "Bad credentials" }, { status: 401 });
      if (url.pathname === "/api/user") return Response.json({ id: Number(account.id), login: `user${account.id}` });
      if (url.pathname === "/api/user/emails") {
        return Response.json(account.email === null ? [] : [{ email: account.email, primary: true, verified: account.verified }]);
      }
      if (url.pathname === "/api/userinfo") return Response.json({ sub: account.id, email: account.email, email_verified: account.verified });
      return new Response("not found", { status: 404 });
    },
  });
  self.url = `http://127.0.0.1:${server.port}`;
  return self;
}
