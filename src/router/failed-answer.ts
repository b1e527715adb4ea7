/**
 * Which upstream answers fail an attempt, so that ./forward.ts tries the next target, before the
 * client has seen a byte: 429 and 5xx, a redirect (a wrong base_url), an upstream refusing the
 * gateway's own credentials, and an answer encoded though none was asked for. Everything else,
 * a 400 included, is the answer the client gets.
 */
import type { UpstreamReply } from "./exchange";
import type { UpstreamState } from "./upstream-setup";

/**
 * Upstream statuses that refuse the gateway itself, not the client's request: its api_key (401,
 * 403), a proxy's credentials (407), or the account behind the key out of funds (402, as
 * OpenRouter answers). Passed on, each would read as a refusal of the client's own key or balance.
 */
const CREDENTIAL_REFUSALS = new Set([401, 402, 403, 407]);

/** Why an upstream's answer fails the attempt (the next target is tried), or null when it is the answer. */
export function failedAnswer(upstream: UpstreamState, reply: UpstreamReply): string | null {
  const { status } = reply;
  if (CREDENTIAL_REFUSALS.has(status)) {
    return status === 402
      ? `upstream "${upstream.name}" refused for its own billing (HTTP 402); check the account behind its api_key`
      : `upstream "${upstream.name}" refused the gateway's credentials (HTTP ${status}); check its api_key`;
  }
  // A redirect is never followed (it would resend the body elsewhere) nor relayed (a client of
  // the API cannot use it): it means the upstream's base_url is wrong.
  if (status >= 300 && status < 400)
    return `upstream "${upstream.name}" answered ${status}, a redirect; check its base_url (https instead of http? a missing /v1?)`;
  if (status === 429 || status >= 500) return `upstream "${upstream.name}" answered ${status}`;
  // Asked for none; an answer encoded anyway would reach the client as garbage under a 200.
  const encoding = upstream.viaFetch ? null : reply.header("content-encoding");
  if (encoding !== null && encoding !== "" && encoding.toLowerCase() !== "identity") {
    return `upstream "${upstream.name}" answered with content-encoding ${encoding.slice(0, 40)}, though the gateway asked for none`;
  }
  return null;
}
