// priorart analyst UI: plain JavaScript, no build step. Talks to the JSON API of the same origin.
"use strict";

const $ = (sel) => document.querySelector(sel);
const COMPONENTS = ["bm25", "dense", "text", "meta", "joint", "wordpair", "domain", "fused"];
const state = { codes: [], last: null, lastKind: null, suggestTimer: null, completeTimer: null,
  completion: { items: [], active: -1 }, marked: {}, category: {}, queries: [], chart: null, health: null, drop: [] };
const STAGE_WORDS = { bm25: "word match (BM25)", dense: "meaning (dense)", text: "neural text ranker",
  meta: "classification ranker", joint: "joint ranker", wordpair: "word-pair model", domain: "domain model" };

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
  if (state.drop.length) body.drop_translations = state.drop;
  body.collapse_families = !$("#show-all").checked;
  const fb = feedbackBody();
  if (fb) body.feedback = fb;
  return body;
}

function feedbackBody() {
  const ids = Object.keys(state.marked);
  const relevant = ids.filter((id) => state.marked[id] === "rel");
  const nonrelevant = ids.filter((id) => state.marked[id] === "non");
  return relevant.length || nonrelevant.length ? { relevant, nonrelevant } : null;
}

// ---------- the address: a search is a URL ----------
function toUrl(body) {
  const p = new URLSearchParams();
  p.set("q", body.query);
  if (body.lang !== "auto") p.set("lang", body.lang);
  p.set("k", String(body.k));
  if (body.codes.length) p.set("codes", body.codes.join(","));
  if (body.code_filter !== "none") p.set("level", body.code_filter);
  if (body.before) p.set("before", body.before);
  if (!body.collapse_families) p.set("all", "1");
  return `${location.pathname}?${p.toString()}`;
}

function fromUrl() {
  const p = new URLSearchParams(location.search);
  if (!p.get("q")) return false;
  $("#query").value = p.get("q");
  $("#lang").value = p.get("lang") || "auto";
  $("#k").value = p.get("k") || "20";
  state.codes = (p.get("codes") || "").split(",").filter(Boolean);
  renderChips();
  $("#code-filter").value = p.get("level") || "none";
  $("#before").value = p.get("before") || "";
  $("#show-all").checked = p.get("all") === "1";
  return true;
}

// ---------- document search ----------
// The components that shaped a ranking: those of fusion.weights with a non-zero weight that applied
// (fusion.components), in COMPONENTS order. A score computed with weight 0 (e.g. dense under a BM25-only
// ranking) did not shape it and gets no bar.
function shaping(fusion) {
  const weights = (fusion && fusion.weights) || {};
  const fate = (fusion && fusion.components) || {};
  const order = (c) => (COMPONENTS.includes(c) ? COMPONENTS.indexOf(c) : COMPONENTS.length);
  return Object.keys(weights).filter((c) => weights[c] !== 0 && (!fate[c] || fate[c].startsWith("applied")))
    .sort((a, b) => order(a) - order(b));
}

// One bar per component that shaped the ranking, with its weight, then the fused score and, for the first results
// of a ranking ordered by passage evidence, the best passage's score they were ordered with.
const UNWEIGHTED = {
  fused: (v) => `fused score ${v.toFixed(3)}: the weighted combination of the components (the order below the first ` +
    "results a ranker or their best passage ordered)",
  evidence: (v) => `best passage ${v.toFixed(3)}: the first results are ordered by their best passage`,
  ranker: (v) => `learned ranker ${v.toFixed(3)} (min-max over the first results): they are ordered by it`,
};
function bars(components, fusion) {
  const weights = (fusion && fusion.weights) || {};
  const rows = shaping(fusion).filter((c) => components[c] !== null && components[c] !== undefined);
  for (const c of ["fused", "evidence", "ranker"]) if (components[c] !== null && components[c] !== undefined) rows.push(c);
  return rows.map((c) => {
    const value = components[c];
    const v = Math.max(0, Math.min(1, value));
    const w = c in UNWEIGHTED ? "" : `×${weights[c].toFixed(2)}`;
    const title = c in UNWEIGHTED ? UNWEIGHTED[c](value)
      : `${STAGE_WORDS[c] || c}: normalised score ${value.toFixed(3)}, weight ${weights[c].toFixed(2)}`;
    return `<div class="bar-row" data-component="${esc(c)}" title="${esc(title)}"><span class="name">${esc(c)}</span>` +
      `<span class="w">${w}</span>` +
      `<span class="bar"><span style="width:${(v * 100).toFixed(1)}%;background:var(--${esc(c)}, var(--other))"></span></span>` +
      `<span class="v">${value.toFixed(3)}</span></div>`;
  }).join("");
}

function marks(id) {
  const m = state.marked[id];
  return `<div class="marks"><button type="button" class="mark-rel" data-id="${esc(id)}" aria-pressed="${m === "rel"}">relevant</button>` +
    `<button type="button" class="mark-non" data-id="${esc(id)}" aria-pressed="${m === "non"}">not relevant</button>` +
    (m === "rel" ? `<label>category <select class="category" data-id="${esc(id)}">${["X", "Y", "A"].map((c) =>
      `<option ${state.category[id] === c ? "selected" : ""}>${c}</option>`).join("")}</select></label>` : "") + "</div>";
}

function familyLine(h) {
  if (!h.family || !h.family.length) return "";
  return `<div class="family">same family: ${h.family.map((m) =>
    `<a href="#" class="doc-link" data-id="${esc(m.id)}">${esc(m.id)}</a> (${esc(m.grouped_by.join(", "))})`).join(", ")}</div>`;
}

// The query's words the document contains (themselves or through a translation); on hover, the index terms (stems)
// each matched as.
function matchedLine(h) {
  const words = (h.matched_terms || []).slice(0, 12);
  if (!words.length) return "";
  const stems = h.matched_stems || {};
  const hover = words.map((w) => `${w}: ${(stems[w] || [w]).join(", ")}`).join("; ");
  return `<div class="terms" title="${esc("index terms matched — " + hover)}">matched: ${esc(words.join(", "))}</div>`;
}

// A query in the query language: where the document has each clause of its words ("toner in cl, desc").
const FIELD_WORDS = { ti: "title", ab: "abstract", cl: "claims", desc: "description", pa: "applicant", in: "inventor" };
function fieldsLine(h) {
  const parts = Object.entries(h.fields || {}).map(([clause, fields]) =>
    `<code>${esc(clause)}</code> in <span title="${esc(fields.map((f) => FIELD_WORDS[f] || f).join(", "))}">${esc(fields.join(", "))}</span>`);
  return parts.length ? `<div class="fields">where: ${parts.join("; ")}</div>` : "";
}

function renderHits(data) {
  const out = data.results.map((h, i) => `
    <article class="hit ${state.marked[h.id] === "rel" ? "relevant" : state.marked[h.id] === "non" ? "nonrelevant" : ""}" data-id="${esc(h.id)}">
      <div class="rank">${i + 1}</div>
      <div>
        <h3><a href="#" class="doc-link" data-id="${esc(h.id)}">${esc(h.title || "(no title)")}</a></h3>
        <div class="meta-line"><b>${esc(h.id)}</b> · ${esc(h.publication_date || "")}
          ${(h.codes || []).slice(0, 6).map((c) => `<code>${esc(c)}</code>`).join("")}</div>
        ${matchedLine(h)}
        ${(h.clauses || []).length ? `<div class="clauses">satisfies: ${h.clauses.map((c) => `<code>${esc(c)}</code>`).join(" ")}</div>` : ""}
        ${fieldsLine(h)}
        ${familyLine(h)}
        ${marks(h.id)}
      </div>
      <div class="bars">${bars(h.components, data.fusion)}</div>
    </article>`).join("");
  $("#results").innerHTML = out || "<p>No results.</p>";
}

function renderPassages(data) {
  const out = data.results.map((p, i) => `
    <article class="passage" data-id="${esc(p.passage_id)}">
      <div class="path">${i + 1}. <b><a href="#" class="doc-link" data-id="${esc(p.doc_id)}">${esc(p.doc_id)}</a></b>
        ${esc(p.title || "")} › ${esc(p.section_path.join(" › "))} · <span class="lang">${esc(p.lang || "")}</span>
        ${p.field ? `· <span class="field" title="${esc(FIELD_WORDS[p.field] || p.field)}">${esc(p.field)}</span>` : ""}
        · score ${p.score.toFixed(3)}</div>
      <p>${highlight(p.text, p.highlights, p.matches)}</p>
    </article>`).join("");
  $("#results").innerHTML = out || "<p>No passages.</p>";
}

// Matched words marked; a word matched through a translation says on hover which query words it renders
// ("Ausdehnungsgefäß → expansion"). `matches` (start, end, query_words, translated) replaces the bare spans.
function highlight(text, spans, matches) {
  const marks = matches && matches.length ? matches : spans.map(([start, end]) => ({ start, end }));
  let html = "", pos = 0;
  for (const m of [...marks].sort((a, b) => a.start - b.start)) {
    if (m.start < pos) continue;
    const word = text.slice(m.start, m.end);
    const hover = m.translated && m.query_words && m.query_words.length
      ? ` class="translated" title="${esc(m.query_words.join(", ") + " → " + word)}"` : "";
    html += esc(text.slice(pos, m.start)) + `<mark${hover}>` + esc(word) + "</mark>";
    pos = m.end;
  }
  return html + esc(text.slice(pos));
}

// What ordered the results: the response's own sentence (`ranking`, the words of `ranked_by`: the explanation and
// `priorart search` say the same), then the fusion's weights (the order below the first documents) and what it left out.
function rankingLine(data) {
  const f = data.fusion;
  if (!f) return "";
  const used = Object.entries(f.weights).map(([c, w]) => `${c} ${w.toFixed(2)}`).join(", ");
  const off = Object.entries(f.components).filter(([, v]) => v.startsWith("not applied"))
    .map(([c, v]) => `${c}: ${v.replace("not applied: ", "")}`);
  const codes = ((data.query || {}).predicted_codes || []).join(", ");
  const said = data.ranking ? `${data.ranking}.` : `Ranked by ${used}.`;  // (passages: the documents' fused order)
  const extra = data.ranked_by === "learned ranker" ? ` Codes the first results predict: ${codes || "none"}.` : "";
  return `<div class="ranking" id="ranking" data-ranked-by="${esc(data.ranked_by || "fusion")}">${esc(said + extra)}` +
    `<br><small>fusion: ${esc(used)} (${esc(f.source)})</small>` +
    (off.length ? `<br><small>not used: ${esc(off.join("; "))}</small>` : "") + "</div>";
}

// the query language: how the query was read, each term's words and translations (a click drops a translation)
function readingLine(data) {
  const f = (data.query || {}).filters || {};
  const read = f.query;
  if (!read) return "";
  const terms = read.terms.map((t) => {
    const own = t.words.slice(0, 12).map((w) => `<span class="word">${esc(w)}</span>`).join(" ");
    const tr = Object.entries(t.translations).map(([lang, ws]) => `<b>${esc(lang)}</b> ` + ws.slice(0, 12)
      .map((w) => `<button type="button" class="drop-translation" data-word="${esc(w)}" title="leave this translation out">${esc(w)} ×</button>`).join(" ")).join(" ");
    const dropped = t.dropped.length ? ` <small>left out: ${esc(t.dropped.join(", "))}</small>` : "";
    return `<li><code>${esc(t.term)}</code> · ${t.documents} documents: ${own}${tr ? " · translated: " + tr : ""}${dropped}</li>`;
  }).join("");
  return `<div class="reading" id="reading">Read as <code>${esc(read.parsed)}</code>: ${f.n_allowed ?? 0} documents ` +
    `pass, ranked by <i>${esc(read.ranked_by)}</i><ul>${terms}</ul></div>`;
}

function renderNotices(data) {
  const explained = data.explained || (data.notices || []).map((n) => ({ text: n, detail: "" }));
  $("#notices").innerHTML = readingLine(data) + rankingLine(data) +
    explained.map((n) => `<div class="notice"><span class="said">${esc(n.text)}</span>` +
      (n.detail ? `<details><summary>details</summary><span class="operator">${esc(n.detail)}</span></details>` : "") +
      "</div>").join("");
  const fb = data.query && data.query.feedback;
  $("#feedback-line").innerHTML = fb ? `Expanded from ${fb.relevant.length} relevant and ${fb.nonrelevant.length} not relevant: added ` +
    (Object.entries(fb.added_terms).filter(([, t]) => t.length).map(([l, t]) => `<b>${esc(l)}</b> <span class="added">${esc(t.join(", "))}</span>`).join("; ") || "no terms") +
    (fb.dense ? ` · ${esc(fb.dense)}` : "") : "";
  renderShaped(data);
}

function renderShaped(data) {
  // the header names the stages that shaped this ranking, not every stage loaded
  const h = state.health;
  const used = shaping(data.fusion).map((c) => STAGE_WORDS[c] || c);
  if (data.reordered) used.push(`${data.ranked_by === "learned ranker" ? "learned ranker" : "best passage"} ` +
    `(first ${data.reordered})`);
  const q = data.query || {};
  if (q.translated) used.push(`translation (${Object.values(q.route_tables || {}).join(", ") || q.translation})`);
  if (q.feedback) used.push("relevance feedback");
  if (q.filters && (q.filters.codes || q.filters.before)) used.push("filters");
  if (data.families && data.families.hidden) used.push(`${data.families.hidden} family members folded`);
  $("#health").textContent = `${h ? h.documents + " documents · " : ""}this ranking: ${used.join(" + ")}`;
}

async function run(kind, push = true) {
  const body = requestBody();
  if (!body.query.trim()) { setStatus("Type a query first.", true); return; }
  if (kind === "search" && push) {
    const url = toUrl(body);
    if (url !== location.pathname + location.search) history.pushState(null, "", url);
  }
  setStatus(kind === "search" ? "Searching…" : "Ranking passages…");
  $("#document").hidden = true;
  try {
    const data = await api(kind === "search" ? "/search" : "/passages", body);
    state.last = data; state.lastKind = kind;
    state.queries.push(body);
    updateSessionButtons();
    if (kind === "search") renderHits(data); else renderPassages(data);
    renderNotices(data);
    const q = data.query || {};
    setStatus(`${data.results.length} ${kind === "search" ? "documents" : "passages"} in ${data.took_ms.toFixed(0)} ms` +
      (q.lang ? ` · query language ${q.lang}` : "") + ((q.translated_to || []).length ? ` · translated to ${q.translated_to.join(", ")}` : ""));
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

// ---------- relevance marks, claim chart, search report ----------
function mark(id, how) {
  if (state.marked[id] === how) delete state.marked[id]; else state.marked[id] = how;
  if (how === "rel" && !state.category[id]) state.category[id] = "X";
  if (state.last && state.lastKind === "search") renderHits(state.last);
  updateSessionButtons();
}

function relevantIds() { return Object.keys(state.marked).filter((id) => state.marked[id] === "rel"); }

function updateSessionButtons() {
  $("#clear-marks").disabled = Object.keys(state.marked).length === 0;
  $("#export-chart-csv").disabled = $("#export-chart-html").disabled = !state.chart;
  $("#export-report-html").disabled = $("#export-report-csv").disabled = $("#export-report-json").disabled =
    relevantIds().length === 0 && !state.chart;
}

function chartBody() {
  const body = { claim_text: $("#query").value, lang: $("#lang").value, documents: relevantIds().slice(0, 20), k: 5,
    codes: state.codes, code_filter: $("#code-filter").value };
  if ($("#before").value) body.before = $("#before").value;
  return body;
}

function renderChart(c) {
  const cells = Object.fromEntries(c.cells.map((x) => [`${x.element}|${x.doc_id}`, x]));
  const head = c.documents.map((d) => `<th data-doc="${esc(d.id)}">${esc(d.id)}<br><small>${esc(d.title || "")}</small><br>` +
    `<small>${d.disclosed}/${c.elements.length} disclosed · suggests ${d.category}</small></th>`).join("");
  const rows = c.elements.map((e) => `<tr data-element="${esc(e.label)}"><th>${esc(e.label)}<br><small>${esc(e.kind)}</small></th>` +
    `<td>${esc(e.text)}</td>` + c.documents.map((d) => {
      const x = cells[`${e.label}|${d.id}`];
      if (!x || x.text === null) return `<td class="not-found">—</td>`;
      return `<td class="${x.status.replace(" ", "-")}"><b>${esc(x.status)}</b> (${Math.round(x.overlap * 100)}% of terms)` +
        `<div class="path">${esc(x.section_path.join(" › "))} · ${esc(x.lang || "")}</div>` +
        `${highlight(x.text, x.highlights, x.matches)}</td>`;
    }).join("") + "</tr>").join("");
  $("#chart").innerHTML = `<h2>Claim chart: claim ${c.claim} (${esc(c.lang)})</h2><p id="coverage">${esc(c.coverage)}</p>` +
    (c.notes.length ? `<p class="path">${esc(c.notes.join("; "))}</p>` : "") +
    `<table><thead><tr><th>element</th><th>claim text</th>${head}</tr></thead><tbody>${rows}</tbody></table>` +
    `<p class="path">disclosed / partly / not found: share of the element's words found in the passage (or its translation) — an aid, not a judgement.</p>`;
  $("#chart").hidden = false;
}

async function runChart() {
  const body = chartBody();
  if (!body.claim_text.trim()) { setStatus("Paste a claim first.", true); return; }
  setStatus("Charting the claim…");
  try {
    const c = await api("/claimchart", body);
    state.chart = c;
    c.documents.forEach((d) => { if (state.marked[d.id] === "rel" && !state.categoryChosen?.[d.id]) state.category[d.id] = d.category; });
    renderChart(c);
    if (state.last && state.lastKind === "search") renderHits(state.last);
    setStatus(`Claim chart: ${c.elements.length} elements × ${c.documents.length} documents in ${c.took_ms.toFixed(0)} ms`);
    $("#chart").scrollIntoView({ behavior: "smooth" });
  } catch (err) {
    state.chart = null; $("#chart").hidden = true;
    setStatus(`Error: ${err.message}`, true);
  }
  updateSessionButtons();
}

async function fetchFile(path, body, name, type) {
  const res = await fetch(path, { method: "POST", headers: apiHeaders(), body: JSON.stringify(body) });
  if (!res.ok) { const d = await res.json().catch(() => ({})); throw new Error(d.detail || `HTTP ${res.status}`); }
  download(name, type, await res.text());
}

async function exportChart(fmt) {
  try {
    await fetchFile(`/claimchart?format=${fmt}`, chartBody(), `claim-chart-${state.chart.claim}.${fmt}`, fmt === "csv" ? "text/csv" : "text/html");
  } catch (err) { setStatus(`Error: ${err.message}`, true); }
}

function reportBody(fmt) {
  return { title: "Search report", format: fmt, claim_chart: state.chart, queries: state.queries.slice(-20).map((q) => {
      const { explain, ...rest } = q; return rest; }),
    documents: relevantIds().map((id) => ({ id, category: state.category[id] || "X",
      claims: state.chart ? `1-${state.chart.claim}` : "" })) };
}

async function exportReport(fmt) {
  try {
    await fetchFile("/report", reportBody(fmt), `search-report.${fmt}`,
      { csv: "text/csv", html: "text/html", json: "application/json" }[fmt]);
  } catch (err) { setStatus(`Error: ${err.message}`, true); }
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

// Codes (with their titles) whose symbol or title matches q: the classification box's and the query box's lists.
async function codeMatches(q) {
  return (await api(`/codes?q=${encodeURIComponent(q)}&limit=12`)).results;
}

async function suggest() {
  const q = $("#code-input").value.trim();
  const list = $("#code-suggestions");
  if (q.length < 2) { list.hidden = true; return; }
  try {
    const results = await codeMatches(q);
    list.innerHTML = results.map((r) => `<li data-code="${esc(r.code)}"><code>${esc(r.code)}</code>${esc(r.title || "")}</li>`).join("");
    list.hidden = results.length === 0;
  } catch (err) {
    list.hidden = true;
  }
}

// ---------- query box: completion of field names, operators and codes ----------
const FIELDS = [  // [what is inserted, what it searches, the longer names that complete to it from 2 letters]
  ["ti=", "title", ["title"]], ["ab=", "abstract", ["abstract"]], ["cl=", "claims", ["claims", "claim"]],
  ["desc=", "description", ["description"]], ["txt=", "title, abstract and names", ["text"]],
  ["ta=", "title or abstract", []], ["ftxt=", "claims or description", []], ["ia=", "inventor or applicant", []],
  ["pa=", "applicant", ["applicant"]], ["in=", "inventor", ["inventor"]],
  ["pn=", "publication number, from its start (EP064)", ["num", "publication", "publication_number"]],
  ["pc=", "publishing office (DE)", ["country"]], ["kind=", "kind code (B1)", ["kd"]],
  ["cpc=", "CPC code, with its subgroups", []], ["ipc=", "IPC code, with its subgroups", ["ic"]],
  ["pd<", "publication date (also = <= > >= within)", ["publication_date"]],
  ["ad<", "filing date", ["filing_date", "application_date"]], ["prd<", "priority date", ["priority_date"]],
];
const OPERATORS = [["AND", "both"], ["OR", "either"], ["NOT", "the first and not the second"],
  ["NEAR/3", "at most 3 words apart, either order"], ["ADJ/2", "the right one 1 to 2 words after the left one"],
  ["SENT", "in one sentence"], ["PARA", "in one paragraph"]];
// a partial code after cpc= / ipc= / ic=, cpc=( ..., or Espacenet's cpc any "...
const CODE_AT = /(?:^|[\s(])(?:cpc|ipc|ic)\s*(?:=\s*\(?\s*|=\s*\([^()"]*\s|\s+(?:any|all)\s+"(?:[^"]*\s)?)([A-Za-z0-9][A-Za-z0-9/]*)$/i;
// where a field can begin: at the start, after "(" or an operator in capitals, or anywhere once the query has a
// field clause (not after a pasted claim's "and": its words are no place for a list)
const CLAUSE_START = /(?:^|\()\s*$|\b(?:AND|OR|NOT|NEAR|ADJ|SENT|PARA)(?:\/\d+)?\s+$/;
const FIELD_CLAUSE = /(?:^|[\s(])[a-z_]+\s*(?:[=<>]|\s(?:all|any)\s+")/i;

// What the query box can complete at the caret (pure): {from, to, code} (a partial code, to ask /codes about) or
// {from, to, items} (operators and fields for the word being typed); null: nothing. text[from, to) is replaced.
function queryCompletions(text, caret) {
  const before = text.slice(0, caret);
  if (/^[\w/]/.test(text.slice(caret))) return null;  // the caret is inside a word
  const code = before.match(CODE_AT);
  if (code) return { from: caret - code[1].length, to: caret, code: code[1] };
  const word = (before.match(/(?:^|[\s(])([A-Za-z_]+)$/) || [])[1];
  if (!word || (before.match(/"/g) || []).length % 2) return null;  // no word here, or inside a "phrase"
  const head = before.slice(0, -word.length), lower = word.toLowerCase();
  const ops = /^[A-Z]+$/.test(word) ? OPERATORS.filter(([op]) => op.startsWith(word)) : [];
  const fields = CLAUSE_START.test(head) || FIELD_CLAUSE.test(head)
    ? FIELDS.filter(([f, , names]) => [f, ...(lower.length > 1 ? names : [])].some((n) => n.startsWith(lower))) : [];
  const items = [...ops.map(([op, text]) => ({ value: `${op} `, label: op, text })),
    ...fields.map(([f, text]) => ({ value: f, label: f, text }))];
  return items.length ? { from: caret - word.length, to: caret, items } : null;
}

function renderCompletions(items, active = -1) {
  const list = $("#query-suggestions"), box = $("#query");
  if (active >= items.length) active = -1;  // an empty list chooses nothing
  state.completion = { items, active };
  list.innerHTML = items.map((it, i) => `<li role="option" id="query-option-${i}" data-i="${i}" aria-selected="${i === active}"` +
    `${i === active ? ' class="active"' : ""}><code>${esc(it.label)}</code>${esc(it.text || "")}</li>`).join("");
  list.hidden = items.length === 0;
  if (active >= 0) { box.setAttribute("aria-activedescendant", `query-option-${active}`); list.children[active].scrollIntoView({ block: "nearest" }); }
  else box.removeAttribute("aria-activedescendant");
}

// On each edit: operators and fields at once; codes from /codes, debounced. Only a code is chosen in advance (after
// cpc= nothing else is meant): elsewhere Enter and Tab keep their meaning until an arrow key picks an entry.
function complete() {
  const box = $("#query");
  const c = box.selectionStart === box.selectionEnd ? queryCompletions(box.value, box.selectionEnd) : null;
  clearTimeout(state.completeTimer);
  if (!c || c.items) { renderCompletions(c ? c.items : []); return; }
  const partial = c.code.toUpperCase();  // until /codes answers, the codes listed that still fit (none go stale)
  renderCompletions(state.completion.items.filter((it) => it.value.toUpperCase().startsWith(partial)), 0);
  state.completeTimer = setTimeout(async () => {
    try {
      const results = await codeMatches(c.code);
      const now = queryCompletions(box.value, box.selectionEnd);
      if (document.activeElement !== box || !now || now.code !== c.code) return;  // typed on, or left the box
      renderCompletions(results.map((r) => ({ value: r.code, label: r.code, text: r.title })), 0);
    } catch (err) {
      renderCompletions([]);
    }
  }, 150);
}

function acceptCompletion(i) {
  const box = $("#query"), item = state.completion.items[i];
  const c = item && queryCompletions(box.value, box.selectionEnd);
  if (c) {
    box.value = box.value.slice(0, c.from) + item.value + box.value.slice(c.to);
    box.selectionStart = box.selectionEnd = c.from + item.value.length;
    state.drop = [];  // a new query: its own translations
  }
  renderCompletions([]);
}

function completionKeys(e) {
  const { items, active } = state.completion;
  if ($("#query-suggestions").hidden) return;
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    const n = items.length;
    renderCompletions(items, e.key === "ArrowDown" ? (active + 1) % n : (active <= 0 ? n : active) - 1);
  } else if ((e.key === "Enter" || e.key === "Tab") && active >= 0) {
    e.preventDefault();
    acceptCompletion(active);
  } else if (e.key === "Escape") {
    e.preventDefault();
    renderCompletions([]);
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
    const shown = [...shaping(d.fusion), "fused", "evidence", "ranker"];  // the columns of the bars on screen
    rows = [["rank", "id", "title", "score", ...shown, "publication_date", "codes"]];
    d.results.forEach((h, i) => rows.push([i + 1, h.id, h.title, h.score, ...shown.map((c) => h.components[c] ?? ""),
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
    if (a) { e.preventDefault(); openDocument(a.dataset.id); return; }
    const rel = e.target.closest(".mark-rel"), non = e.target.closest(".mark-non");
    if (rel) mark(rel.dataset.id, "rel");
    if (non) mark(non.dataset.id, "non");
  });
  $("#results").addEventListener("change", (e) => {
    const sel = e.target.closest(".category");
    if (sel) { state.category[sel.dataset.id] = sel.value; state.categoryChosen = { ...(state.categoryChosen || {}), [sel.dataset.id]: true }; }
  });
  $("#notices").addEventListener("click", (e) => {
    const drop = e.target.closest(".drop-translation");
    if (drop && !state.drop.includes(drop.dataset.word)) { state.drop.push(drop.dataset.word); run(state.lastKind || "search"); }
  });
  $("#query").addEventListener("input", () => { state.drop = []; complete(); });  // a new query: its own translations
  $("#query").addEventListener("keydown", completionKeys);
  $("#query").addEventListener("blur", () => { clearTimeout(state.completeTimer); renderCompletions([]); });
  $("#query-suggestions").addEventListener("mousedown", (e) => e.preventDefault());  // the box keeps the focus
  $("#query-suggestions").addEventListener("click", (e) => { const li = e.target.closest("li"); if (li) acceptCompletion(Number(li.dataset.i)); });
  $("#chart-btn").addEventListener("click", runChart);
  $("#clear-marks").addEventListener("click", () => { state.marked = {}; if (state.last && state.lastKind === "search") renderHits(state.last); updateSessionButtons(); });
  $("#export-chart-csv").addEventListener("click", () => exportChart("csv"));
  $("#export-chart-html").addEventListener("click", () => exportChart("html"));
  $("#export-report-html").addEventListener("click", () => exportReport("html"));
  $("#export-report-csv").addEventListener("click", () => exportReport("csv"));
  $("#export-report-json").addEventListener("click", () => exportReport("json"));
  window.addEventListener("popstate", () => { if (fromUrl()) run("search", false); });
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
    state.health = h;
    if (!state.last) $("#health").textContent = `${h.documents} documents`;
    else renderShaped(state.last);
  }).catch(() => { $("#health").textContent = "service unavailable"; });
  if (fromUrl()) run("search", false);
});
