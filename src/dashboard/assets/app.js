// modelgate dashboard client script: local times, copy buttons, confirmations, and the streaming
// playground. Pages work without it except the playground, which needs fetch streaming.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  for (const el of document.querySelectorAll("time[data-local]")) {
    const d = new Date(el.getAttribute("datetime"));
    if (!isNaN(d)) { el.title = el.textContent; el.textContent = d.toLocaleString(); }
  }

  for (const button of document.querySelectorAll("[data-copy]")) {
    button.addEventListener("click", async function () {
      const input = document.querySelector(button.getAttribute("data-copy"));
      if (!input) return;
      try {
        await navigator.clipboard.writeText(input.value);
      } catch {
        input.select();
        document.execCommand("copy");
      }
      button.textContent = "Copied";
      setTimeout(function () { button.textContent = "Copy"; }, 2000);
    });
  }

  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", function (event) {
      if (!window.confirm(form.getAttribute("data-confirm"))) event.preventDefault();
    });
  }

  for (const form of document.querySelectorAll("form[data-json-form]")) setUpJsonForm(form);

  const playground = document.getElementById("playground");
  if (playground) setUpPlayground(playground);
});

// Sign-in and sign-up: post as a script so a refusal (wrong password, throttled, sign-up closed)
// is shown on the page, and success goes to data-next. Without this it is a plain form post.
function setUpJsonForm(form) {
  const error = form.querySelector(".form-error");
  const button = form.querySelector("button[type=submit]");
  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    button.disabled = true;
    error.hidden = true;
    try {
      const response = await fetch(form.action, {
        method: "POST",
        credentials: "same-origin",
        headers: { accept: "application/json" },
        body: new URLSearchParams(new FormData(form)),
      });
      if (response.ok) {
        window.location.assign(form.getAttribute("data-next") || "/dashboard");
        return;
      }
      let message = "Something went wrong (HTTP " + response.status + ").";
      // `display`: the words the page shows for this refusal without the script.
      try { const body = (await response.json()).error; message = body.display || body.message || message; } catch {}
      error.textContent = message;
      error.hidden = false;
    } catch {
      error.textContent = "The gateway could not be reached.";
      error.hidden = false;
    }
    button.disabled = false;
  });
}

function setUpPlayground(form) {
  document.getElementById("pg-fields").disabled = false;
  const transcript = document.getElementById("transcript");
  const status = document.getElementById("pg-status");
  const prompt = form.elements.prompt;
  const send = form.querySelector("button[type=submit]");
  const stop = document.getElementById("pg-stop");
  const messages = [];
  // One request at a time; Clear starts a new conversation, which an answer of the old one
  // still streaming must not write into.
  let running = null;
  let conversation = 0;

  function add(kind, text) {
    const div = document.createElement("div");
    div.className = "msg " + kind;
    div.textContent = text;
    transcript.appendChild(div);
    return div;
  }

  stop.addEventListener("click", function () {
    if (running) running.abort();
  });

  document.getElementById("pg-clear").addEventListener("click", function () {
    conversation += 1;
    if (running) running.abort();
    messages.length = 0;
    transcript.replaceChildren();
    status.textContent = "";
  });

  prompt.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" || !(event.ctrlKey || event.metaKey)) return;
    event.preventDefault();
    // While an answer streams the key does nothing: not even the browser's "fill out this field"
    // bubble for an empty prompt, which would cover the Stop button.
    if (!running) form.requestSubmit();
  });

  form.addEventListener("submit", async function (event) {
    event.preventDefault();
    const text = prompt.value.trim();
    // requestSubmit() (Ctrl+Enter) fires even while Send is disabled: one answer at a time.
    if (!text || running) return;
    const model = form.elements.model.value;
    const mine = conversation;
    const controller = new AbortController();
    running = controller;
    messages.push({ role: "user", content: text });
    const asked = add("user", text);
    prompt.value = "";
    send.disabled = true;
    stop.hidden = false;
    const answer = add("assistant", "");
    answer.setAttribute("aria-busy", "true");
    status.textContent = "Waiting for " + model + "…";
    const started = performance.now();
    let chunks = 0;
    let skipped = 0;
    let usage = null;
    try {
      // Signed out meanwhile (another tab): without its cookie the call would go on as an
      // anonymous caller's, on anonymous limits, where a signed-in page means the account.
      const me = await fetch("/auth/me", { credentials: "same-origin", headers: { accept: "application/json" }, signal: controller.signal });
      if (me.status === 401) throw new Error("Your session has ended (signed out in another tab?): sign in again to use the playground.");
      const response = await fetch("/v1/chat/completions", {
        method: "POST",
        credentials: "same-origin",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: model, messages: messages, stream: true, stream_options: { include_usage: true } }),
        signal: controller.signal,
      });
      if (!response.ok) {
        let message = "HTTP " + response.status;
        try { message = (await response.json()).error.message || message; } catch {}
        throw new Error(message);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) !== -1) {
          const event = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          for (const line of event.split("\n")) {
            if (!line.startsWith("data:")) continue;
            const data = line.slice(5).trim();
            if (data === "[DONE]") continue;
            let parsed;
            try {
              parsed = JSON.parse(data);
            } catch {
              skipped += 1; // one broken event does not throw away the answer so far
              continue;
            }
            if (parsed.error) throw new Error(parsed.error.message || "upstream error");
            if (parsed.usage) usage = parsed.usage;
            const delta = parsed.choices && parsed.choices[0] && parsed.choices[0].delta;
            if (delta && delta.content) {
              if (chunks === 0) status.textContent = "Answering with " + model + "…";
              answer.textContent += delta.content;
              chunks += 1;
              answer.setAttribute("data-chunks", String(chunks));
            }
          }
        }
      }
      if (mine !== conversation) return; // cleared while the last bytes arrived
      messages.push({ role: "assistant", content: answer.textContent });
      const seconds = ((performance.now() - started) / 1000).toFixed(2);
      status.textContent = "Done in " + seconds + " s, " + chunks + " chunks" +
        (usage ? ", " + usage.prompt_tokens + " prompt + " + usage.completion_tokens + " completion tokens" : "") +
        (skipped ? ", " + skipped + " event(s) that were not JSON skipped" : "") + ".";
    } catch (error) {
      if (mine !== conversation) return; // cleared: this answer's conversation is gone
      if (answer.textContent) {
        // Stopped, or broken off: what came so far stays, in the page and in the conversation.
        messages.push({ role: "assistant", content: answer.textContent });
        if (controller.signal.aborted) status.textContent = "Stopped after " + chunks + " chunks.";
        else {
          add("error", error.message);
          status.textContent = "Broken off after " + chunks + " chunks.";
        }
      } else {
        // Nothing came: the turn is not part of the conversation, so it leaves the page too, and
        // its prompt goes back to the box to send again (unless something new was typed there).
        messages.pop();
        asked.remove();
        if (!prompt.value) prompt.value = text;
        answer.className = "msg error";
        answer.textContent = controller.signal.aborted ? "Stopped before an answer arrived." : error.message;
        status.textContent = controller.signal.aborted ? "Stopped: the prompt is back in the box." : "Failed: the prompt is back in the box.";
      }
    } finally {
      running = null;
      answer.removeAttribute("aria-busy");
      answer.setAttribute("data-done", "true");
      send.disabled = false;
      stop.hidden = true;
      prompt.focus();
    }
  });
}
