/**
 * The signed-out pages: sign in and sign up (only when `auth.signup` allows it). The forms post
 * to the identities part's own endpoints (/auth/login, /auth/signup), which check Origin,
 * throttle attempts and set the session cookie. With the client script they are sent as JSON
 * requests, so a refusal shows without leaving the page; without it they are plain form posts,
 * and a refusal comes back here as `?error=CODE`, shown from the fixed messages in
 * src/auth/refusal.ts (never text from the URL). Both ways, success goes to `next`, carried in a
 * hidden field and to the OAuth buttons. "Continue with GitHub / Google" appears only for
 * configured providers. (The first-run admin form is ./setup.ts.)
 */
import type { Config } from "../../config/schema";
import { allowedDomains } from "../../auth/email";
import { emailInput, html, type Html } from "../html";

export interface SignedOutView {
  auth: Config["auth"];
  /** Where to go after signing in (a /dashboard path, already checked by safeNext). */
  next: string;
  /** The message for a refused attempt, from refusalMessage(); null for none. */
  error: string | null;
}

export function signinPage(view: SignedOutView): Html {
  return html`<div class="card narrow">
  <form method="post" action="/auth/login" id="signin-form" data-json-form data-next="${view.next}">
    ${formError(view.error)}
    ${nextField(view.next)}
    <label for="email">Email</label>${emailInput("email", { autocomplete: "username", autofocus: true })}
    <label for="password">Password</label><input id="password" name="password" type="password" required autocomplete="current-password">
    <button type="submit">Sign in</button>
  </form>
  ${oauthButtons(view)}
  ${
    view.auth.signup === "closed"
      ? html`<p class="muted">Accounts are created by an administrator.</p>`
      : html`<p>New here? <a href="${withNext("/dashboard/signup", view.next)}">Create an account</a>${view.auth.signup === "domain" ? html` <span class="muted">(${domains(view.auth)})</span>` : ""}.</p>`
  }
</div>`;
}

export function signupPage(view: SignedOutView): Html {
  if (view.auth.signup === "closed") {
    return html`<div class="card narrow"><p>Sign-up is closed on this gateway; ask an administrator for an account.</p><p><a href="/dashboard/signin">Sign in</a></p></div>`;
  }
  return html`<div class="card narrow">
  <form method="post" action="/auth/signup" id="signup-form" data-json-form data-next="${view.next}">
    ${formError(view.error)}
    ${nextField(view.next)}
    <label for="email">Email ${view.auth.signup === "domain" ? html`<span class="hint">${domains(view.auth)}</span>` : ""}</label>
    ${emailInput("email", { autocomplete: "username", autofocus: true })}
    <label for="password">Password <span class="hint">at least 8 characters</span></label>
    <input id="password" name="password" type="password" required minlength="8" autocomplete="new-password">
    <button type="submit">Create account</button>
  </form>
  ${oauthButtons(view)}
  <p>Already have an account? <a href="${withNext("/dashboard/signin", view.next)}">Sign in</a>.</p>
</div>`;
}

/** The form's message area: shown with a message, kept hidden for the client script otherwise. */
export function formError(message: string | null): Html {
  return message === null
    ? html`<p class="notice error form-error" role="alert" hidden></p>`
    : html`<p class="notice error form-error" role="alert">${message}</p>`;
}

function nextField(next: string): Html | "" {
  return next === "/dashboard" ? "" : html`<input type="hidden" name="next" value="${next}">`;
}

function withNext(path: string, next: string): string {
  return next === "/dashboard" ? path : `${path}?next=${encodeURIComponent(next)}`;
}

/** OAuth sign-in comes back through the identities part's callback, which goes on to `next`. */
function oauthButtons(view: SignedOutView): Html | "" {
  const { auth } = view;
  if (!auth.github && !auth.google) return "";
  return html`<p class="or">or</p><div class="oauth">
    ${auth.github ? html`<a class="button" href="${withNext("/auth/github", view.next)}">Continue with GitHub</a>` : ""}
    ${auth.google ? html`<a class="button" href="${withNext("/auth/google", view.next)}">Continue with Google</a>` : ""}
  </div>`;
}

function domains(auth: Config["auth"]): string {
  return `addresses at ${allowedDomains(auth).join(", ")} only`;
}
