/**
 * The Playground: pick a model, type a prompt, watch the answer stream in. The client script
 * (assets/app.js) POSTs to /v1/chat/completions with `stream: true` and the session cookie, so
 * the request goes through the same identity, rate limit and credit checks as any other caller.
 */
import type { ModelRegistry } from "../../router/registry";
import { html, type Html } from "../html";

export function playgroundPage(registry: ModelRegistry, options: { model?: string } = {}): Html {
  const routes = registry.list();
  if (routes.length === 0) return html`<p class="card">No models are configured yet.</p>`;
  // Disabled until the script enables it: without JavaScript the form would send the prompt in a URL.
  return html`<noscript><p class="card notice">The playground streams answers with JavaScript, which is off in this browser.</p></noscript>
<form id="playground" class="card"><fieldset id="pg-fields" disabled>
  <div class="row">
    <div><label for="pg-model">Model</label>
      <select id="pg-model" name="model">${routes.map((r) => html`<option value="${r.id}"${r.id === options.model ? html` selected` : ""}>${r.id}${r.free ? " (free)" : ""}</option>`)}</select></div>
  </div>
  <label for="pg-prompt">Prompt <span class="hint">Ctrl+Enter sends</span></label>
  <textarea id="pg-prompt" name="prompt" required placeholder="Ask something"></textarea>
  <button type="submit">Send</button> <button type="button" class="secondary" id="pg-stop" hidden>Stop</button> <button type="button" class="secondary" id="pg-clear">Clear</button>
  <p id="pg-status" class="muted" role="status" aria-live="polite"></p>
</fieldset></form>
<section aria-label="Conversation"><div id="transcript" class="transcript" aria-live="polite"></div></section>
<p class="muted">Requests from the playground use your session: they count against your rate limit and credits like any API call.</p>`;
}
