// The console's only script. The server renders every page as an HTML fragment and pushes a new one over a
// streamed fetch (Server-Sent Events framing) whenever the page's data changes; this script shows it, keeps open
// disclosures open, ticks elapsed times with the local clock, and sends the bearer token (kept in sessionStorage)
// as an Authorization header. There is no polling: a dropped stream reconnects with Last-Event-ID.
"use strict";

(() => {
  const TOKEN_KEY = "mcp-harness-console-token";
  const content = document.getElementById("content");
  const live = document.getElementById("live");
  const login = document.getElementById("login");
  const signout = document.getElementById("signout");
  let lastId = null;
  let skew = 0; // server clock minus ours, from each view's `now`
  let backoff = 500;
  let controller = null;

  const token = () => sessionStorage.getItem(TOKEN_KEY);
  const headers = (extra) => {
    const h = Object.assign({}, extra || {});
    const t = token();
    if (t) h.Authorization = "Bearer " + t;
    return h;
  };
  const setLive = (state, text) => {
    live.dataset.state = state;
    live.textContent = text || state;
  };

  function showLogin(message) {
    setLive("signed-out", "signed out");
    login.hidden = false;
    content.hidden = true;
    const err = document.getElementById("login-error");
    err.hidden = !message;
    err.textContent = message || "";
  }

  login.addEventListener("submit", (ev) => {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, login.elements.token.value.trim());
    login.elements.token.value = "";
    login.hidden = true;
    content.hidden = false;
    connect();
  });
  signout.addEventListener("click", (ev) => {
    ev.preventDefault();
    sessionStorage.removeItem(TOKEN_KEY);
    if (controller) controller.abort();
    showLogin();
  });

  function apply(view) {
    const open = new Set();
    content.querySelectorAll("details[data-key]").forEach((d) => {
      if (d.open) open.add(d.dataset.key);
    });
    const closed = new Set();
    content.querySelectorAll("details[data-key]").forEach((d) => {
      if (!d.open) closed.add(d.dataset.key);
    });
    const armed = content.querySelector("button.cancel[data-armed]");
    content.innerHTML = view.html;
    content.querySelectorAll("details[data-key]").forEach((d) => {
      if (open.has(d.dataset.key)) d.open = true;
      else if (closed.has(d.dataset.key)) d.open = false;
    });
    if (armed) {
      const again = content.querySelector(`button.cancel[data-cancel="${armed.dataset.cancel}"]`);
      if (again) arm(again);
    }
    skew = view.now - Date.now();
    document.title = view.title + " · mcp-harness";
    formatTimes();
    tick();
  }

  function formatTimes() {
    content.querySelectorAll("time[data-ms]").forEach((t) => {
      t.textContent = new Date(Number(t.dataset.ms)).toLocaleString();
    });
  }

  function tick() {
    const now = Date.now() + skew;
    content.querySelectorAll(".elapsed[data-live]").forEach((el) => {
      const start = Number(el.dataset.start);
      el.textContent = ((now - start) / 1000).toFixed(1) + " s";
    });
  }
  setInterval(tick, 1000);

  function arm(button) {
    button.dataset.armed = "1";
    button.textContent = "Confirm: cancel the whole tree";
  }

  content.addEventListener("click", async (ev) => {
    const cancel = ev.target.closest("button.cancel");
    if (cancel) {
      ev.preventDefault();
      if (!cancel.dataset.armed) return arm(cancel);
      cancel.disabled = true;
      cancel.textContent = "Canceling…";
      const r = await fetch(`/api/runs/${encodeURIComponent(cancel.dataset.cancel)}/cancel`, {
        method: "POST",
        headers: headers({ "Content-Type": "application/json" }),
        body: "{}",
      });
      if (!r.ok) cancel.textContent = (await r.json()).message || "Cancel failed";
      return;
    }
    const download = ev.target.closest("a[data-download]");
    if (download) {
      ev.preventDefault();
      const r = await fetch(download.dataset.download, { headers: headers() });
      if (!r.ok) return;
      const url = URL.createObjectURL(await r.blob());
      const a = document.createElement("a");
      a.href = url;
      a.download = decodeURIComponent(new URLSearchParams(download.dataset.download.split("?")[1]).get("path")).split("/").pop();
      a.click();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    }
  });

  function handle(event, data) {
    if (event === "view") {
      apply(JSON.parse(data));
      setLive("live", "live");
    } else if (event === "gone") {
      content.innerHTML = `<p class="err"></p>`;
      content.firstChild.textContent = JSON.parse(data).message;
    }
  }

  async function connect() {
    if (controller) controller.abort();
    controller = new AbortController();
    const query = new URLSearchParams(location.search);
    query.set("page", location.pathname);
    const h = headers({ Accept: "text/event-stream" });
    if (lastId) h["Last-Event-ID"] = lastId;
    signout.hidden = !token();
    setLive("connecting", "connecting");
    let response;
    try {
      response = await fetch("/api/stream?" + query.toString(), { headers: h, signal: controller.signal, cache: "no-store" });
    } catch (err) {
      return retry();
    }
    if (response.status === 401) return showLogin(token() ? "That token was refused." : "");
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      content.innerHTML = `<p class="err"></p>`;
      content.firstChild.textContent = body.message || `Error ${response.status}`;
      setLive("error", "error");
      return;
    }
    backoff = 500;
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let event = "message", data = [], id = null;
          for (const line of block.split("\n")) {
            if (line.startsWith(":")) continue;
            const colon = line.indexOf(":");
            const field = colon < 0 ? line : line.slice(0, colon);
            const val = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
            if (field === "event") event = val;
            else if (field === "data") data.push(val);
            else if (field === "id") id = val;
          }
          if (id !== null) lastId = id;
          if (data.length) handle(event, data.join("\n"));
        }
      }
    } catch (err) {
      if (err.name === "AbortError") return;
    }
    retry();
  }

  function retry() {
    setLive("retrying", "reconnecting");
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 10000);
  }

  window.mcpHarnessConsole = { reconnect: connect };
  connect();
})();
