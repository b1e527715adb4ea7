/**
 * The signed-out pages: sign in and sign up (only when `auth.signup` allows it). The forms post
 * to the identities part's own endpoints (/auth/login, /auth/signup), which check Origin,
 * throttle attempts and set the session cookie. The client script sends them as JSON requests so
 * a refusal shows as a message on the page and success goes to `next`; without the script they
 * are plain form posts. "Continue with GitHub / Google" appears only for configured providers.
 * (The first-run admin form is the identities part's GET /setup page.)
 */
import type { Config } from "../../config/schema";
import { html, type Html } from "../html";

export interface SignedOutView {
  auth: Config["auth"];
  /** Where to go after signing in (a /dashboard path). */
  next: string;
}

export function signinPage(view: SignedOutView): Html {
  return html`<div class="card narrow">
  <form method="post" action="/auth/login" id="signin-form" data-json-form data-next="${view.next}">
    ${formError()}
    <label for="email">Email</label><input id="email" name="email" type="email" required autocomplete="username" autofocus>
    <label for="password">Password</label><input id="password" name="password" type="password" required autocomplete="current-password">
    <button type="submit">Sign in</button>
  </form>
  ${oauthButtons(view.auth)}
  ${view.auth.signup === "closed"
    ? html`<p class="muted">Accounts are created by an administrator.</p>`
    : html`<p>New here? <a href="/dashboard/signup">Create an account</a>${view.auth.signup === "domain" ? html` <span class="muted">(${domains(view.auth)})</span>` : ""}.</p>`}
</div>`;
}

export function signupPage(view: SignedOutView): Html {
  if (view.auth.signup === "closed") {
    return html`<div class="card narrow"><p>Sign-up is closed on this gateway; ask an administrator for an account.</p><p><a href="/dashboard/signin">Sign in</a></p></div>`;
  }
  return html`<div class="card narrow">
  <form method="post" action="/auth/signup" id="signup-form" data-json-form data-next="${view.next}">
    ${formError()}
    <label for="email">Email ${view.auth.signup === "domain" ? html`<span class="hint">${domains(view.auth)}</span>` : ""}</label>
    <input id="email" name="email" type="email" required autocomplete="username" autofocus>
    <label for="password">Password <span class="hint">at least 8 characters</span></label>
    <input id="password" name="password" type="password" required minlength="8" autocomplete="new-password">
    <button type="submit">Create account</button>
  </form>
  ${oauthButtons(view.auth)}
  <p>Already have an account? <a href="/dashboard/signin">Sign in</a>.</p>
</div>`;
}

function formError(): Html {
  return html`<p class="notice error form-error" role="alert" hidden></p>`;
}

/** OAuth sign-in ends on /dashboard (the identities part's callback decides where). */
function oauthButtons(auth: Config["auth"]): Html | "" {
  if (!auth.github && !auth.google) return "";
  return html`<p class="or">or</p><div class="oauth">
    ${auth.github ? html`<a class="button" href="/auth/github">Continue with GitHub</a>` : ""}
    ${auth.google ? html`<a class="button" href="/auth/google">Continue with Google</a>` : ""}
  </div>`;
}

function domains(auth: Config["auth"]): string {
  return `addresses at ${auth.allowed_domains.join(", ")} only`;
}

/** A safe post-sign-in target: a path under /dashboard, never another site. */
export function safeNext(value: unknown): string {
  return typeof value === "string" && /^\/dashboard(\/[A-Za-z0-9/_-]*)?$/.test(value) ? value : "/dashboard";
}
