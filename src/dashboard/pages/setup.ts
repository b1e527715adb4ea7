/**
 * The first-run setup page behind the one-time link the gateway logs while no administrator
 * exists (`/setup?token=…`): the form that chooses the first administrator's email and password,
 * in the dashboard's layout. It posts to the identities part's POST /setup, which checks the
 * token, Origin and the sign-in throttle and sends a refused post back here as `?error=CODE`.
 * The token only ever sits in the hidden field of a page for a link that still works.
 */
import { emailInput, html, type Html } from "../html";
import { formError } from "./signin";

export function setupPage(view: { token: string; error: string | null }): Html {
  return html`<div class="card narrow">
  <p>Choose the administrator's email and password. This link works once, within 24 hours of the start that printed it.</p>
  <form method="post" action="/setup">
    ${formError(view.error)}
    <input type="hidden" name="token" value="${view.token}">
    <label for="email">Administrator email</label>
    ${emailInput("email", { autocomplete: "username", autofocus: true })}
    <label for="password">Password <span class="hint">8 to 256 characters</span></label>
    <input id="password" name="password" type="password" required minlength="8" maxlength="512" autocomplete="new-password">
    <button type="submit">Create administrator</button>
  </form>
</div>`;
}

export function setupLinkInvalidPage(message: string): Html {
  return html`<div class="card narrow">
  <p class="notice error" role="alert">${message}</p>
  <p>If an administrator exists, <a href="/dashboard/signin">sign in</a>. Otherwise restart modelgate: every start without an administrator logs a new link. On the server, <code>modelgate user add EMAIL --admin --password-stdin</code> creates one too.</p>
</div>`;
}
