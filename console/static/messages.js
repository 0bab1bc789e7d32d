// The Messages page: the streamed search (progress, cap, cancel), the live tail, and the
// JSON-field inputs shown only for a JSON search. No inline script: the CSP forbids it.
"use strict";

(() => {
  const form = document.getElementById("search-form");
  if (!form) return;
  const panel = document.getElementById("search-panel");
  const body = document.querySelector("#search-results tbody");
  const progress = document.getElementById("search-progress");
  const summary = document.getElementById("search-summary");
  const errors = document.getElementById("search-errors");
  const start = document.getElementById("search-start");
  const cancel = document.getElementById("search-cancel");
  const mode = document.getElementById("search-mode");
  let running = null; // the AbortController of the search in flight

  const mib = (n) => (n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : `${(n / 1024).toFixed(1)} KiB`);

  function showJsonInputs() {
    const json = mode.value === "json";
    for (const el of form.querySelectorAll(".json-only")) el.hidden = !json;
    document.getElementById("search-path").required = json;
  }

  function describe(p, final) {
    const parts = [`${p.hits} hit${p.hits === 1 ? "" : "s"}`];
    parts.push(`${p.files_scanned}/${p.files_total} cold files (${mib(p.cold_bytes_scanned)} read of a ${mib(p.table_bytes)} table)`);
    parts.push(`${p.hot_records_scanned}/${p.hot_records_total} hot records`);
    if (final) {
      parts.push(`${p.elapsed_ms} ms`);
      if (p.capped) parts.push("cap reached");
    }
    summary.textContent = parts.join(" · ");
    const total = p.files_total + (p.hot_records_total ? 1 : 0);
    const done = p.files_scanned + (p.hot_records_total ? p.hot_records_scanned / p.hot_records_total : 0);
    progress.value = final ? 1 : total ? done / total : 0;
  }

  function showError(doc) {
    const div = document.createElement("div");
    div.className = "error";
    div.setAttribute("role", "alert");
    const name = document.createElement("strong");
    name.className = "error-name";
    name.textContent = doc.error_code;
    div.append(name, ` ${doc.partition !== undefined ? `partition ${doc.partition}: ` : ""}${doc.message}`);
    errors.append(div);
  }

  function handle(doc) {
    if (doc.type === "hit") body.insertAdjacentHTML("beforeend", doc.html);
    else if (doc.type === "progress") describe(doc, false);
    else if (doc.type === "done") { describe(doc, true); panel.dataset.state = "done"; }
    else if (doc.type === "error") showError(doc);
  }

  function finish(state) {
    running = null;
    start.disabled = false;
    cancel.disabled = true;
    if (state) panel.dataset.state = state;
  }

  async function run() {
    const controller = new AbortController();
    running = controller;
    body.replaceChildren();
    errors.replaceChildren();
    summary.textContent = "searching…";
    progress.value = 0;
    panel.hidden = false;
    panel.dataset.state = "running";
    start.disabled = true;
    cancel.disabled = false;
    const params = new URLSearchParams(new FormData(form));
    try {
      const response = await fetch(`/messages/search?${params}`, { signal: controller.signal });
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffered = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffered += decoder.decode(value, { stream: true });
        const lines = buffered.split("\n");
        buffered = lines.pop();
        for (const line of lines) if (line) handle(JSON.parse(line));
      }
      finish(null);
    } catch (err) {
      if (err.name === "AbortError") {
        summary.textContent += " · cancelled";
        finish("cancelled");
      } else {
        showError({ error_code: "NETWORK_EXCEPTION", message: String(err) });
        finish("failed");
      }
    }
  }

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!running) run();
  });
  cancel.addEventListener("click", () => { if (running) running.abort(); });
  mode.addEventListener("change", showJsonInputs);
  showJsonInputs();
  if (form.dataset.autostart === "true") run();
})();

(() => {
  const toggle = document.getElementById("tail-toggle");
  if (!toggle) return;
  const body = document.querySelector("#records tbody");
  const status = document.getElementById("tail-status");
  let timer = null;

  async function poll() {
    const params = new URLSearchParams({
      topic: toggle.dataset.topic, next: toggle.dataset.next, binary: toggle.dataset.binary,
    });
    try {
      const response = await fetch(`/messages/tail?${params}`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const html = await response.text();
      if (html.trim()) body.insertAdjacentHTML("beforeend", html);
      toggle.dataset.next = response.headers.get("X-Next") || toggle.dataset.next;
      status.textContent = `following · ${new Date().toISOString().slice(11, 19)} UTC`;
    } catch (err) {
      status.textContent = `tail paused: ${err.message}`;
    }
  }

  toggle.addEventListener("click", () => {
    if (timer) {
      clearInterval(timer);
      timer = null;
      toggle.textContent = "Live tail";
      status.textContent = "";
    } else {
      timer = setInterval(poll, 2000);
      toggle.textContent = "Stop tail";
      poll();
    }
  });
})();
