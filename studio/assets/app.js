// stategraph studio: the page's script. Plain JavaScript, no libraries. Every value from the
// file is put on the page as text (textContent), never as markup; the graph's SVG comes from
// the server with every name escaped.
"use strict";

const PAGE = 100;        // checkpoints per history page
const LIST_PAGE = 100;   // items of a long list shown (and fetched) at a time
const POLL_MS = 1500;    // how often the open thread is checked for new checkpoints

const S = {
  info: null, thread: null, rows: new Map(), order: [], older: null, head: null,
  selected: null, graphKey: null, runs: [], polling: null,
  ns: "", namespaces: [],   // the namespace shown ("" = the root graph) and the thread's list
};

const $ = (id) => document.getElementById(id);
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function short(id) { return id ? id.slice(-8) : "-"; }
// The open thread's API path, and the namespace parameter (`sep` is "?" or "&").
function base() { return "/api/threads/" + encodeURIComponent(S.thread); }
function nsq(sep) { return S.ns ? sep + "ns=" + encodeURIComponent(S.ns) : ""; }
function nsLabel(ns) {
  const n = S.namespaces.find((x) => x.ns === ns);
  return n ? n.label : ns || "(root)";
}

async function api(path, options) {
  const res = await fetch(path, Object.assign({ credentials: "same-origin" }, options || {}));
  let body = null;
  try { body = await res.json(); } catch (_) { body = null; }
  if (!res.ok) {
    const msg = body && body.error ? body.error : res.status + " " + res.statusText;
    const err = new Error(msg); err.status = res.status; throw err;
  }
  return body;
}
function showError(e) { $("error").textContent = e ? String(e.message || e) : ""; }

// ---- JSON viewer: collapsible, long lists paged (the server sends the first items of a
// long list; the rest are fetched a page at a time) ----
function jsonView(value, key, path, cutLists, from) {
  const label = key === undefined ? null : el("span", "key", key + ": ");
  if (value !== null && typeof value === "object") {
    const isArr = Array.isArray(value);
    const entries = isArr ? value.map((v, i) => [i, v]) : Object.entries(value);
    const total = isArr && cutLists && cutLists.has(path) ? cutLists.get(path) : entries.length;
    const d = el("details");
    d.open = total <= 20 || key === undefined;
    const sum = el("summary");
    if (label) sum.appendChild(label);
    sum.appendChild(el("span", null, isArr ? "[" + total + " items]" : "{" + total + " keys}"));
    d.appendChild(sum);
    let shown = 0;
    const more = el("button", "more");
    more.type = "button";
    const render = () => {
      if (shown >= total) more.remove();
      else more.textContent = "show " + Math.min(LIST_PAGE, total - shown) + " more of " + (total - shown);
    };
    const showMore = async () => {
      if (shown >= entries.length && shown < total && from) {
        const q = "?path=" + encodeURIComponent(path) + "&offset=" + shown + "&limit=" + LIST_PAGE + nsq("&");
        const page = await api(from + "/list" + q);
        page.items.forEach((v, i) => entries.push([shown + i, v]));
      }
      const next = entries.slice(shown, shown + LIST_PAGE);
      for (const [k, v] of next) d.insertBefore(jsonView(v, k, path + "/" + pointerKey(k), cutLists, from), more);
      shown += next.length;
      render();
    };
    d.appendChild(more);
    more.addEventListener("click", () => showMore().catch(showError));
    showMore().catch(showError);
    return d;
  }
  const line = el("div", "leaf");
  if (label) line.appendChild(label);
  const cls = typeof value === "string" ? "str" : typeof value === "number" ? "num" : "lit";
  line.appendChild(el("span", cls, JSON.stringify(value)));
  return line;
}
function pointerKey(k) { return String(k).replace(/~/g, "~0").replace(/\//g, "~1"); }
function showJson(id, value, cutLists, from) {
  $(id).replaceChildren(jsonView(value, undefined, "", cutLists || new Map(), from));
}

// ---- threads and runs ----
async function loadThreads() {
  const threads = await api("/api/threads");
  const ul = $("threads");
  ul.replaceChildren();
  if (threads.length === 0) ul.appendChild(el("li", "meta", "no threads in this file"));
  for (const t of threads) {
    const li = el("li", "thread" + (t.thread === S.thread ? " on" : ""));
    li.dataset.thread = t.thread;
    li.appendChild(el("div", "name", t.thread));
    const meta = el("div", "meta");
    meta.appendChild(el("span", "status-" + t.status, t.status));
    meta.appendChild(document.createTextNode(" · " + t.checkpoints + " checkpoints · step " + t.last_step + " · " + t.runs.length + " runs"));
    li.appendChild(meta);
    li.appendChild(el("div", "meta", "updated " + t.updated_at));
    li.addEventListener("click", () => openThread(t.thread).catch(showError));
    ul.appendChild(li);
  }
}

async function loadRuns() {
  S.runs = await api(base() + "/runs");
  const ul = $("runs");
  ul.replaceChildren();
  $("runs-box").hidden = S.runs.length === 0;
  for (const r of S.runs) {
    const li = el("li", "run");
    li.dataset.run = r.run_id;
    li.appendChild(el("div", "name", r.run_id));
    li.appendChild(el("div", "meta", r.status + (r.reason ? " — " + r.reason : "") + " · " + r.created_at));
    const receipt = el("details", "json");
    receipt.appendChild(el("summary", null, r.receipt ? "delivery receipt" : "no delivery receipt"));
    if (r.receipt) receipt.appendChild(jsonView(r.receipt));
    li.appendChild(receipt);
    ul.appendChild(li);
  }
}

// ---- a thread: graph, history ----
async function openThread(thread) {
  showError(null);
  S.thread = thread; S.ns = "";
  $("thread-title").textContent = "Thread " + thread;
  for (const li of document.querySelectorAll(".thread")) li.classList.toggle("on", li.dataset.thread === thread);
  await loadNamespaces();
  await Promise.all([openNamespace("", null), loadRuns()]);
  startPolling();
}

// ---- subgraph namespaces: each with its own graph, history and states ----
async function loadNamespaces() {
  const list = await api(base() + "/namespaces");
  S.namespaces = list.namespaces;
  const sel = $("ns");
  sel.replaceChildren();
  for (const n of S.namespaces) {
    const task = n.task ? " · task " + n.task.slice(-6) : "";
    const o = el("option", null, "\u00a0\u00a0".repeat(n.depth) + n.label + task + " · " + n.checkpoints + " checkpoints");
    o.value = n.ns;
    sel.appendChild(o);
  }
  sel.value = S.ns;
  $("ns-bar").hidden = S.namespaces.length < 2;
}

// Show namespace `ns` of the open thread, with checkpoint `id` (its newest when null) selected.
async function openNamespace(ns, id) {
  showError(null);
  S.ns = ns; S.rows = new Map(); S.order = []; S.older = null; S.selected = null; S.graphKey = null;
  $("ns").value = ns;
  $("detail").hidden = true;
  $("thread-title").textContent = "Thread " + S.thread + (ns ? " › " + nsLabel(ns) : "");
  $("fork-go").disabled = !!ns || S.info.read_only;
  $("fork-result").textContent = ns ? "a subgraph's checkpoints are not forked on their own: fork the root graph's step" :
    S.info.read_only ? "read-only: forking is off" : "";
  await Promise.all([loadPage(null, id), loadGraph(id)]);
}

function subgraphLink(sg, prefix) {
  const b = el("button", "sub", prefix + nsLabel(sg.ns) + (sg.task ? " · task " + sg.task.slice(-6) : "") + " (" + sg.checkpoints + " checkpoints)");
  b.type = "button";
  b.dataset.ns = sg.ns;
  b.addEventListener("click", (e) => { e.stopPropagation(); openNamespace(sg.ns, null).catch(showError); });
  return b;
}

function showParentStep(page) {
  const box = $("ns-path");
  box.replaceChildren();
  const ps = page.parent_step;
  if (!S.ns || !ps) return;
  box.appendChild(document.createTextNode("ran in step " + ps.step + " of " + nsLabel(ps.ns) + (ps.to ? "" : " (that step has not ended)") + " "));
  const b = el("button", "up", "open the parent step");
  b.type = "button";
  b.addEventListener("click", () => openNamespace(ps.ns, ps.to || ps.from).catch(showError));
  box.appendChild(b);
}

async function loadGraph(checkpoint) {
  const q = checkpoint ? "?checkpoint=" + checkpoint + nsq("&") : nsq("?");
  const g = await api(base() + "/graph" + q);
  if (g.key && g.key === S.graphKey) return;
  S.graphKey = g.key;
  const box = $("graph");
  if (g.svg) box.innerHTML = g.svg; // built by the server, every name escaped
  else box.replaceChildren(el("p", "meta", g.note));
  markGraph();
}

async function loadPage(before, pick) {
  const q = "?limit=" + PAGE + (before ? "&before=" + before : "") + nsq("&");
  const page = await api(base() + "/history" + q);
  S.head = page.head;
  S.older = page.older;
  const box = $("history");
  if (!before) { box.replaceChildren(); S.rows = new Map(); S.order = []; }
  if (before) box.appendChild(el("div", "cp end", "── older page ──"));
  for (const r of page.rows) {
    S.rows.set(r.id, r); S.order.push(r.id);
    const row = historyRow(r);
    if (r.id === page.head) for (const sg of page.running || []) row.appendChild(subgraphLink(sg, "⤷ running in the next step: "));
    box.appendChild(row);
  }
  $("older").hidden = !S.older;
  fillCompare();
  if (!before) showParentStep(page);
  if (!S.selected && page.rows.length && !before) await select(pick || page.head);
  else markRows();
}

function historyRow(r) {
  const div = el("div", "cp");
  div.dataset.id = r.id;
  div.appendChild(el("span", "prefix", r.prefix));
  div.appendChild(el("span", "id", short(r.id)));
  div.appendChild(document.createTextNode("  b" + r.branch + " step " + r.step + "  "));
  div.appendChild(el("span", "src", r.source));
  const writes = r.writes && r.writes.length ? "  wrote " + r.writes.join(", ") : "";
  div.appendChild(document.createTextNode("  next: " + (r.next.length ? r.next.join(", ") : "-") + writes));
  if (r.branch_end) div.appendChild(el("span", "end", "  (end of branch " + r.branch + ")"));
  for (const sg of r.subgraphs || []) div.appendChild(subgraphLink(sg, "⤷ subgraph "));
  div.addEventListener("click", () => select(r.id).catch(showError));
  return div;
}

function markRows() {
  for (const d of document.querySelectorAll(".cp[data-id]")) d.classList.toggle("on", d.dataset.id === S.selected);
}

function fillCompare() {
  const sel = $("compare");
  const keep = sel.value;
  sel.replaceChildren(el("option", null, "its parent"));
  sel.firstChild.value = "";
  for (const id of S.order) {
    const r = S.rows.get(id);
    const o = el("option", null, short(id) + " · step " + r.step + " · " + r.source);
    o.value = id;
    sel.appendChild(o);
  }
  sel.value = keep;
}

// The nodes that ran to make checkpoint `r`: what its parent had planned.
function ranAt(r) {
  const p = r && r.parent ? S.rows.get(r.parent) : null;
  return p ? p.next : [];
}

function markGraph() {
  const svg = document.querySelector("#graph svg");
  if (!svg) return;
  for (const n of svg.querySelectorAll(".on-path, .ran, .next")) n.classList.remove("on-path", "ran", "next");
  const r = S.selected ? S.rows.get(S.selected) : null;
  if (!r) return;
  // Walk the branch back through the loaded rows.
  const chain = [];
  for (let c = r; c; c = c.parent ? S.rows.get(c.parent) : null) chain.unshift(c);
  const onPath = new Set(["__start__"]);
  const edges = new Set();
  let prev = ["__start__"];
  for (const c of chain) {
    const ran = ranAt(c);
    if (!ran.length) continue;
    for (const b of ran) { onPath.add(b); for (const a of prev) edges.add(a + "\u0000" + b); }
    prev = ran;
  }
  if (!r.next.length) { onPath.add("__end__"); for (const a of prev) edges.add(a + "\u0000__end__"); }
  for (const g of svg.querySelectorAll("g[data-node]")) {
    const name = g.dataset.node;
    if (onPath.has(name)) g.classList.add("on-path");
    if (ranAt(r).includes(name)) g.classList.add("ran");
    if (r.next.includes(name)) g.classList.add("next");
  }
  for (const p of svg.querySelectorAll("path[data-from]")) {
    if (edges.has(p.dataset.from + "\u0000" + p.dataset.to)) p.classList.add("on-path");
  }
  // A node whose subgraph ran in the selected step opens that subgraph's history.
  for (const g of svg.querySelectorAll("g[data-node]")) {
    const sg = (r.subgraphs || []).find((x) => x.node === g.dataset.node);
    g.classList.toggle("sub", !!sg);
    g.onclick = sg ? () => openNamespace(sg.ns, null).catch(showError) : null;
  }
}

// ---- a checkpoint ----
async function select(id) {
  S.selected = id;
  markRows();
  const from = base() + "/checkpoints/" + id;
  const [cp] = await Promise.all([api(from + nsq("?")), loadGraph(id)]);
  markGraph();
  const h = cp.checkpoint;
  $("detail").hidden = false;
  $("cp-title").textContent = "Checkpoint " + short(h.id) + " · step " + h.step + " · " + h.source;
  $("cp-title").dataset.id = h.id;
  const cutLists = new Map((cp.cut_lists || []).map((c) => [c.path, c.len]));
  showJson("state", cp.state, cutLists, from);
  showJson("interrupts", cp.interrupts);
  showJson("pending", cp.pending);
  showJson("metadata", { id: h.id, parent: h.parent, created_at: h.created_at, next: h.next, metadata: h.metadata });
  showAgent(cp.state);
  await showDiff();
}

async function showDiff() {
  if (!S.selected) return;
  const from = $("compare").value;
  const q = "?to=" + S.selected + (from ? "&from=" + from : "") + nsq("&");
  const d = await api(base() + "/diff" + q);
  const pre = $("diff");
  pre.replaceChildren();
  const step = (h) => (h.step === undefined ? "" : " (step " + h.step + ")");
  const head = (d.from ? "--- " + d.from.id + step(d.from) : "--- (no parent: empty state)") +
    "\n+++ " + d.to.id + step(d.to) + "\n";
  pre.appendChild(document.createTextNode(head));
  if (!d.text) pre.appendChild(el("span", null, "(no changes)\n"));
  for (const line of d.text.split("\n")) {
    if (!line) continue;
    const cls = line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null;
    pre.appendChild(el("span", cls, line + "\n"));
  }
}

// ---- agent threads: conversation, tool calls, capability trace ----
// A message's content (LangChain's form): a string, or blocks whose text is joined and whose
// media are named.
function contentText(content) {
  if (!Array.isArray(content)) return content || "";
  return content.map(b => typeof b === "string" ? b
    : b.type === "text" ? b.text
    : "[" + b.type + (b.mime_type ? ": " + b.mime_type : "") + "]").join("\n");
}

function showAgent(state) {
  const conv = $("conversation");
  conv.replaceChildren();
  const msgs = state && Array.isArray(state.messages) ? state.messages : null;
  if (!msgs) conv.appendChild(el("p", "meta", "this state has no messages field"));
  const results = new Map();
  for (const m of msgs || []) if (m.type === "tool") results.set(m.tool_call_id, m);
  for (const m of msgs || []) {
    if (m.type === "tool") continue;
    const box = el("div", "msg msg-" + m.type);
    box.appendChild(el("span", "who", m.type));
    if (m.content && m.content.length) box.appendChild(el("div", null, contentText(m.content)));
    for (const c of m.tool_calls || []) {
      const call = el("div", "tool-call", "→ " + c.name + "(" + JSON.stringify(c.args) + ")  [" + c.id + "]");
      box.appendChild(call);
      const res = results.get(c.id);
      if (res) {
        const out = el("div", "msg msg-tool");
        out.appendChild(el("span", "who", "tool " + res.name + (res.status ? " · " + res.status : "")));
        out.appendChild(el("div", null, contentText(res.content)));
        box.appendChild(out);
      }
    }
    conv.appendChild(box);
  }
  const trace = $("trace");
  trace.replaceChildren();
  const entries = [];
  for (const r of S.runs) for (const e of (r.metadata && r.metadata.capability_trace) || []) entries.push(e);
  if (!entries.length) { trace.appendChild(el("p", "meta", "no capability trace stored for this thread's runs")); return; }
  const table = el("table", "trace");
  const hr = el("tr");
  for (const h of ["tool", "stage", "verdict", "by", "why", "call / path"]) hr.appendChild(el("th", null, h));
  table.appendChild(hr);
  for (const e of entries) {
    const tr = el("tr", "stage-" + e.stage);
    tr.appendChild(el("td", null, e.tool));
    tr.appendChild(el("td", null, e.stage));
    tr.appendChild(el("td", "verdict-" + e.verdict, e.verdict));
    tr.appendChild(el("td", null, e.by || ""));
    tr.appendChild(el("td", null, e.reason || ""));
    tr.appendChild(el("td", null, e.path || e.call_id || (e.model_call ? "model call " + e.model_call : "")));
    table.appendChild(tr);
  }
  trace.appendChild(table);
}

// ---- fork ----
async function fork() {
  const out = $("fork-result");
  out.textContent = "";
  const body = {
    checkpoint: S.selected,
    set: [{ path: $("fork-path").value.trim(), value: $("fork-value").value }],
    force: $("fork-force").checked,
  };
  try {
    const res = await api(base() + "/fork", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
    });
    out.textContent = "new branch: checkpoint " + res.checkpoint + (res.warnings.length ? " (warning: " + res.warnings.join("; ") + ")" : "");
    S.selected = null;
    await loadPage(null);
    await select(res.checkpoint);
    await loadThreads();
  } catch (e) {
    out.textContent = "not forked: " + e.message;
  }
}

// ---- live ----
function startPolling() {
  if (S.polling) clearInterval(S.polling);
  S.polling = setInterval(async () => {
    if (!S.thread) return;
    try {
      const h = await api(base() + "/head" + nsq("?"));
      if (h.head !== S.head) {
        const keep = S.selected;
        await loadNamespaces();
        await loadPage(null);
        if (keep) markRows();
        await loadThreads();
      }
      $("live").classList.remove("off");
    } catch (_) {
      $("live").classList.add("off");
    }
  }, POLL_MS);
}

// ---- start ----
function tabs() {
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => {
      for (const o of document.querySelectorAll("#tabs button")) o.classList.toggle("on", o === b);
      for (const t of document.querySelectorAll(".tab")) t.hidden = t.id !== "tab-" + b.dataset.tab;
    });
  }
}

// ---- the long-term store: namespaces, a search, an item's JSON (read-only) ----
function nsText(labels) { return labels.join("."); }
async function loadStore() {
  const list = (await api("/api/store/namespaces")).namespaces;
  const ul = $("store-ns");
  ul.replaceChildren();
  if (list.length === 0) ul.appendChild(el("li", "meta", "no store items in this file"));
  for (const labels of list) {
    const li = el("li", "store-ns", nsText(labels));
    li.dataset.ns = nsText(labels);
    li.addEventListener("click", () => {
      $("store-prefix").value = nsText(labels);
      searchStore().catch(showError);
    });
    ul.appendChild(li);
  }
}
async function searchStore() {
  const q = new URLSearchParams({
    prefix: $("store-prefix").value.trim(),
    query: $("store-query").value,
    filter: $("store-filter").value,
  });
  const items = (await api("/api/store/search?" + q.toString())).items;
  const ul = $("store-items");
  ul.replaceChildren();
  if (items.length === 0) ul.appendChild(el("li", "meta", "no items found"));
  for (const item of items) {
    const li = el("li", "store-item");
    li.dataset.key = item.key;
    li.appendChild(el("div", "name", nsText(item.namespace) + " / " + item.key));
    const score = item.score === null ? "" : " · score " + item.score.toFixed(3);
    li.appendChild(el("div", "meta", "updated " + item.updated_at + score));
    li.addEventListener("click", () => showStoreItem(item.namespace, item.key).catch(showError));
    ul.appendChild(li);
  }
  showError(null);
}
async function showStoreItem(labels, key) {
  const q = new URLSearchParams({ namespace: nsText(labels), key });
  const item = await api("/api/store/items?" + q.toString());
  $("store-title").textContent = nsText(item.namespace) + " / " + item.key;
  $("store-meta").textContent = "created " + item.created_at + " · updated " + item.updated_at;
  showJson("store-value", item.value);
  $("store-item").hidden = false;
}

async function start() {
  tabs();
  $("older").addEventListener("click", () => loadPage(S.older).catch(showError));
  $("compare").addEventListener("change", () => showDiff().catch(showError));
  $("fork-go").addEventListener("click", () => fork());
  $("ns").addEventListener("change", () => openNamespace($("ns").value, null).catch(showError));
  S.info = await api("/api/info");
  $("file").textContent = S.info.file;
  $("mode").textContent = S.info.read_only ? "read-only" : "fork enabled";
  if (S.info.read_only) { $("fork-go").disabled = true; $("fork-result").textContent = "read-only: forking is off"; }
  $("store-form").addEventListener("submit", (e) => { e.preventDefault(); searchStore().catch(showError); });
  await loadThreads();
  await loadStore();
  document.body.dataset.ready = "1";
}

start().catch(showError);
