// priorart watches (issue 34): the search page's "Watch this search" button, and the watches page
// (/static/watches.html): each saved search with the new documents in its top k since the last visit, and
// their best passages. Plain JavaScript, self-contained (nothing shared with app.js but the page).
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const SEEN = "priorart-watch-seen";  // watch id -> the newest generation shown on the last visit

  function esc(s) {
    return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }

  function headers() {
    const h = { "Content-Type": "application/json" };
    const key = localStorage.getItem("priorart-api-key");
    if (key) h["X-API-Key"] = key;
    return h;
  }

  async function call(method, path, body) {
    const res = await fetch(path, { method, headers: headers(), body: body === undefined ? undefined : JSON.stringify(body) });
    if (res.status === 204) return null;
    const data = await res.json().catch(() => ({}));
    if (!res.ok) throw new Error(data.detail || data.title || `HTTP ${res.status}`);
    return data;
  }

  // A passage's text with its matched words marked; a word matched through a translation says which query words.
  function marked(p) {
    const spans = p.matches && p.matches.length ? p.matches : (p.highlights || []).map(([start, end]) => ({ start, end }));
    let out = "", pos = 0;
    for (const m of [...spans].sort((a, b) => a.start - b.start)) {
      if (m.start < pos) continue;
      const word = p.text.slice(m.start, m.end);
      const hover = m.translated && m.query_words && m.query_words.length
        ? ` class="translated" title="${esc(m.query_words.join(", ") + " → " + word)}"` : "";
      out += esc(p.text.slice(pos, m.start)) + `<mark${hover}>${esc(word)}</mark>`;
      pos = m.end;
    }
    return out + esc(p.text.slice(pos));
  }

  // ---------- the search page: "Watch this search" ----------
  function searchBody() {
    if (typeof requestBody === "function") return requestBody();  // app.js: the form as a search request
    return { query: $("#query").value, lang: $("#lang").value, k: Number($("#k").value) || 10, codes: [],
      code_filter: $("#code-filter").value, before: $("#before").value || undefined };
  }

  async function watchThisSearch() {
    const s = searchBody();
    const status = $("#status");
    if (!s.query || !s.query.trim()) { status.textContent = "Type a query first."; status.className = "error"; return; }
    const body = { query: s.query, lang: s.lang, k: Math.min(Math.max(1, s.k || 10), 100), codes: s.codes || [],
      code_filter: s.code_filter || "none" };
    if (s.before) body.before = s.before;
    status.textContent = "Saving the watch…"; status.className = "";
    try {
      const w = await call("POST", "/watches", body);
      status.innerHTML = `Watching “${esc(w.name)}” (top ${w.request.k}) from generation ${w.created_generation} on: ` +
        `new documents in its top ${w.request.k} appear on <a href="/static/watches.html#${encodeURIComponent(w.id)}" id="watch-saved">the watches page</a>.`;
    } catch (err) {
      status.textContent = `Error: ${err.message}`; status.className = "error";
    }
  }

  // ---------- the watches page ----------
  function seen() {
    try { return JSON.parse(localStorage.getItem(SEEN) || "{}"); } catch (err) { return {}; }
  }

  function hitHtml(h) {
    const p = h.passage;
    return `<article class="watch-hit" data-doc="${esc(h.doc_id)}" data-generation="${h.generation}">
      <div class="path"><b>${esc(h.doc_id)}</b> ${esc(h.title || "")} · rank ${h.rank} · score ${h.score.toFixed(3)} ·
        generation ${h.generation}${h.publication_date ? ` · published ${esc(h.publication_date)}` : ""}</div>
      ${p ? `<div class="path">${esc(p.section_path.join(" › "))} · <span class="lang">${esc(p.lang || "")}</span></div>
      <p class="passage-text">${marked(p)}</p>` : `<p class="path">(no passage)</p>`}
    </article>`;
  }

  function watchHtml(w, hits, last) {
    const fresh = hits.filter((h) => last === undefined || h.generation > last);
    const older = hits.filter((h) => !fresh.includes(h));
    const q = w.request;
    return `<section class="watch" data-id="${esc(w.id)}" id="${esc(w.id)}">
      <div class="watch-head"><h2>${esc(w.name)}</h2>
        <button type="button" class="watch-delete" data-id="${esc(w.id)}">Delete</button></div>
      <div class="path">top ${q.k} · ${esc(q.lang)}${q.codes.length ? ` · ${esc(q.codes.join(", "))}` : ""} ·
        saved at generation ${w.created_generation} · evaluated at generation ${w.evaluated_generation} ·
        ${w.hits} hit${w.hits === 1 ? "" : "s"}${w.error ? ` · <span class="error">${esc(w.error)}</span>` : ""}
        · <a href="/watches/${encodeURIComponent(w.id)}/feed">Atom feed</a></div>
      <details class="watch-query"><summary>query</summary><p>${esc(q.query)}</p></details>
      <h3>${fresh.length ? `${fresh.length} new since your last visit` : "Nothing new since your last visit"}</h3>
      <div class="new-hits">${fresh.map(hitHtml).join("")}</div>
      ${older.length ? `<details class="older-hits"><summary>${older.length} earlier</summary>${older.map(hitHtml).join("")}</details>` : ""}
    </section>`;
  }

  async function renderWatches() {
    const status = $("#watch-status");
    status.textContent = "Loading…"; status.className = "";
    try {
      const watches = await call("GET", "/watches");
      const last = seen();
      const shown = await Promise.all(watches.map(async (w) => [w, (await call("GET", `/watches/${encodeURIComponent(w.id)}/hits`)).hits]));
      $("#watches").innerHTML = shown.map(([w, hits]) => watchHtml(w, hits, last[w.id])).join("") ||
        `<p>No watches yet: search, then “Watch this search”.</p>`;
      const next = {};
      shown.forEach(([w]) => { next[w.id] = w.evaluated_generation; });
      localStorage.setItem(SEEN, JSON.stringify(next));
      const fresh = shown.reduce((n, [w, hits]) => n + hits.filter((h) => last[w.id] === undefined || h.generation > last[w.id]).length, 0);
      status.textContent = `${watches.length} watch${watches.length === 1 ? "" : "es"}, ${fresh} new hit${fresh === 1 ? "" : "s"} since your last visit`;
      if (location.hash) { const el = document.getElementById(decodeURIComponent(location.hash.slice(1))); if (el) el.scrollIntoView(); }
    } catch (err) {
      status.textContent = `Error: ${err.message}`; status.className = "error";
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    const button = $("#watch-btn");
    if (button) button.addEventListener("click", watchThisSearch);
    const list = $("#watches");
    if (!list) return;
    list.addEventListener("click", async (e) => {
      const del = e.target.closest(".watch-delete");
      if (!del) return;
      try { await call("DELETE", `/watches/${encodeURIComponent(del.dataset.id)}`); } catch (err) {
        $("#watch-status").textContent = `Error: ${err.message}`; $("#watch-status").className = "error"; return;
      }
      renderWatches();
    });
    $("#watch-refresh").addEventListener("click", renderWatches);
    renderWatches();
  });
})();
