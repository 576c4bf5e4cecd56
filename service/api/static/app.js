// priorart analyst UI: plain JavaScript, no build step. Talks to the JSON API of the same origin.
"use strict";

const $ = (sel) => document.querySelector(sel);
const COMPONENTS = ["bm25", "dense", "text", "meta", "joint", "wordpair", "domain", "fused"];
const state = { codes: [], last: null, lastKind: null, suggestTimer: null };

function esc(s) {
  return String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function setStatus(text, isError = false) {
  const el = $("#status");
  el.textContent = text;
  el.className = isError ? "error" : "";
}

function apiHeaders() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem("priorart-api-key");
  if (key) h["X-API-Key"] = key;
  return h;
}

async function api(path, body) {
  const res = await fetch(path, body === undefined ? { headers: apiHeaders() } :
    { method: "POST", headers: apiHeaders(), body: JSON.stringify(body) });
  const data = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(data.detail || data.title || `HTTP ${res.status}`);
  return data;
}

function requestBody() {
  const body = {
    query: $("#query").value,
    lang: $("#lang").value,
    k: Number($("#k").value) || 10,
    codes: state.codes,
    code_filter: $("#code-filter").value,
    explain: true,
  };
  if ($("#before").value) body.before = $("#before").value;
  return body;
}

// ---------- document search ----------
function bars(components) {
  return COMPONENTS.filter((c) => components[c] !== null && components[c] !== undefined).map((c) => {
    const v = Math.max(0, Math.min(1, components[c]));
    return `<div class="bar-row" data-component="${c}"><span>${c}</span>` +
      `<span class="bar"><span style="width:${(v * 100).toFixed(1)}%;background:var(--${c})"></span></span>` +
      `<span class="v">${components[c].toFixed(3)}</span></div>`;
  }).join("");
}

function renderHits(data) {
  const out = data.results.map((h, i) => `
    <article class="hit" data-id="${esc(h.id)}">
      <div class="rank">${i + 1}</div>
      <div>
        <h3><a href="#" class="doc-link" data-id="${esc(h.id)}">${esc(h.title || "(no title)")}</a></h3>
        <div class="meta-line"><b>${esc(h.id)}</b> · ${esc(h.publication_date || "")}
          ${(h.codes || []).slice(0, 6).map((c) => `<code>${esc(c)}</code>`).join("")}</div>
        ${h.matched_terms && h.matched_terms.length ? `<div class="terms">matched: ${esc(h.matched_terms.slice(0, 12).join(", "))}</div>` : ""}
      </div>
      <div class="bars" title="normalised score components: why it ranks here">${bars(h.components)}</div>
    </article>`).join("");
  $("#results").innerHTML = out || "<p>No results.</p>";
}

function renderPassages(data) {
  const out = data.results.map((p, i) => `
    <article class="passage" data-id="${esc(p.passage_id)}">
      <div class="path">${i + 1}. <b><a href="#" class="doc-link" data-id="${esc(p.doc_id)}">${esc(p.doc_id)}</a></b>
        ${esc(p.title || "")} › ${esc(p.section_path.join(" › "))} · score ${p.score.toFixed(3)}</div>
      <p>${highlight(p.text, p.highlights)}</p>
    </article>`).join("");
  $("#results").innerHTML = out || "<p>No passages.</p>";
}

function highlight(text, spans) {
  let html = "", pos = 0;
  for (const [s, e] of [...spans].sort((a, b) => a[0] - b[0])) {
    if (s < pos) continue;
    html += esc(text.slice(pos, s)) + "<mark>" + esc(text.slice(s, e)) + "</mark>";
    pos = e;
  }
  return html + esc(text.slice(pos));
}

function rankingLine(f) {
  if (!f) return "";
  const used = Object.entries(f.weights).map(([c, w]) => `${c} ${w.toFixed(2)}`).join(", ");
  const off = Object.entries(f.components).filter(([, v]) => v.startsWith("not applied"))
    .map(([c, v]) => `${c}: ${v.replace("not applied: ", "")}`);
  return `<div class="ranking" id="ranking">Ranked by ${esc(used)} (${esc(f.source)})` +
    (off.length ? `<br><small>not used: ${esc(off.join("; "))}</small>` : "") + "</div>";
}

function renderNotices(data) {
  $("#notices").innerHTML = rankingLine(data.fusion) +
    (data.notices || []).map((n) => `<div class="notice">${esc(n)}</div>`).join("");
}

async function run(kind) {
  const body = requestBody();
  if (!body.query.trim()) { setStatus("Type a query first.", true); return; }
  setStatus(kind === "search" ? "Searching…" : "Ranking passages…");
  $("#document").hidden = true;
  try {
    const data = await api(kind === "search" ? "/search" : "/passages", body);
    state.last = data; state.lastKind = kind;
    if (kind === "search") renderHits(data); else renderPassages(data);
    renderNotices(data);
    const q = data.query || {};
    setStatus(`${data.results.length} ${kind === "search" ? "documents" : "passages"} in ${data.took_ms.toFixed(0)} ms` +
      (q.lang ? ` · query language ${q.lang}` : "") + (q.translated ? " · translated to English" : ""));
    $("#export-csv").disabled = $("#export-json").disabled = data.results.length === 0;
  } catch (err) {
    // Drop the previous answer: it must not stay on screen (or in the export) as if it answered this query.
    state.last = null; state.lastKind = null;
    $("#results").innerHTML = "";
    $("#notices").innerHTML = "";
    $("#export-csv").disabled = $("#export-json").disabled = true;
    setStatus(`Error: ${err.message}`, true);
  }
}

// ---------- document view ----------
function sectionHtml(sec) {
  const paras = (sec.paragraphs || []).map((p) => `<p>${esc(p)}</p>`).join("");
  const subs = (sec.sections || []).map(sectionHtml).join("");
  return `<details open><summary>${esc(sec.heading || "(untitled)")}</summary>${paras}${subs}</details>`;
}

async function openDocument(id) {
  try {
    const d = await api(`/documents/${encodeURIComponent(id)}`);
    const lang = d.lang && d.title[d.lang] ? d.lang : Object.keys(d.title)[0];
    const claims = Object.entries(d.claims || {}).map(([l, cs]) => `<details ${l === lang ? "open" : ""}>
      <summary>Claims (${esc(l)}, ${cs.length})</summary>
      ${cs.map((c) => `<div class="claim"><b>${c.num}.</b> ${esc(c.text)}${c.refs && c.refs.length ? ` <small>(refers to ${c.refs.join(", ")})</small>` : ""}</div>`).join("")}
    </details>`).join("");
    $("#document").innerHTML = `<button class="close" type="button" id="close-doc">Close</button>
      <h2>${esc(d.title[lang] || d.id)}</h2>
      <div class="meta-line"><b>${esc(d.id)}</b> · published ${esc(d.publication_date || "?")} ·
        ${[...(d.ipc || []), ...(d.cpc || [])].map((c) => `<code>${esc(c)}</code>`).join("")}</div>
      ${Object.entries(d.abstract || {}).map(([l, a]) => `<p><b>Abstract (${esc(l)}):</b> ${esc(a)}</p>`).join("")}
      ${claims}
      <h3>Description</h3>${(d.description || []).map(sectionHtml).join("") || "<p>(none)</p>"}`;
    $("#document").hidden = false;
    $("#close-doc").onclick = () => { $("#document").hidden = true; };
    $("#document").scrollIntoView({ behavior: "smooth" });
  } catch (err) {
    setStatus(`Error: ${err.message}`, true);
  }
}

// ---------- classification codes ----------
function renderChips() {
  $("#code-chips").innerHTML = state.codes.map((c) => `<span class="chip" data-code="${esc(c)}">${esc(c)}</span>`).join("");
}

function addCode(code) {
  code = code.trim().toUpperCase();
  if (code && !state.codes.includes(code)) state.codes.push(code);
  renderChips();
  $("#code-input").value = "";
  $("#code-suggestions").hidden = true;
}

async function suggest() {
  const q = $("#code-input").value.trim();
  const list = $("#code-suggestions");
  if (q.length < 2) { list.hidden = true; return; }
  try {
    const data = await api(`/codes?q=${encodeURIComponent(q)}&limit=12`);
    list.innerHTML = data.results.map((r) => `<li data-code="${esc(r.code)}"><code>${esc(r.code)}</code>${esc(r.title || "")}</li>`).join("");
    list.hidden = data.results.length === 0;
  } catch (err) {
    list.hidden = true;
  }
}

// ---------- export ----------
function download(name, type, content) {
  const a = document.createElement("a");
  a.href = URL.createObjectURL(new Blob([content], { type }));
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
}

function csvCell(v) {
  const s = String(v ?? "");
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

function exportCsv() {
  const d = state.last;
  if (!d) return;
  let rows;
  if (state.lastKind === "search") {
    rows = [["rank", "id", "title", "score", ...COMPONENTS, "publication_date", "codes"]];
    d.results.forEach((h, i) => rows.push([i + 1, h.id, h.title, h.score, ...COMPONENTS.map((c) => h.components[c] ?? ""),
      h.publication_date ?? "", (h.codes || []).join(" ")]));
  } else {
    rows = [["rank", "doc_id", "passage_id", "section_path", "score", "text"]];
    d.results.forEach((p, i) => rows.push([i + 1, p.doc_id, p.passage_id, p.section_path.join(" > "), p.score, p.text]));
  }
  download(`priorart-${state.lastKind}.csv`, "text/csv", rows.map((r) => r.map(csvCell).join(",")).join("\n") + "\n");
}

function exportJson() {
  if (state.last) download(`priorart-${state.lastKind}.json`, "application/json", JSON.stringify(state.last, null, 2));
}

// ---------- wiring ----------
document.addEventListener("DOMContentLoaded", () => {
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); run("search"); });
  $("#passages-btn").addEventListener("click", () => run("passages"));
  $("#export-csv").addEventListener("click", exportCsv);
  $("#export-json").addEventListener("click", exportJson);
  $("#results").addEventListener("click", (e) => {
    const a = e.target.closest(".doc-link");
    if (a) { e.preventDefault(); openDocument(a.dataset.id); }
  });
  $("#code-input").addEventListener("input", () => { clearTimeout(state.suggestTimer); state.suggestTimer = setTimeout(suggest, 150); });
  $("#code-input").addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); const first = $("#code-suggestions li"); addCode(first && !$("#code-suggestions").hidden ? first.dataset.code : e.target.value); }
  });
  $("#code-suggestions").addEventListener("click", (e) => { const li = e.target.closest("li"); if (li) addCode(li.dataset.code); });
  $("#code-chips").addEventListener("click", (e) => {
    const chip = e.target.closest(".chip");
    if (chip) { state.codes = state.codes.filter((c) => c !== chip.dataset.code); renderChips(); }
  });
  api("/health").then((h) => {
    $("#health").textContent = `${h.documents} documents · ${h.stages.join(" → ")} · ${h.device}`;
  }).catch(() => { $("#health").textContent = "service unavailable"; });
});
