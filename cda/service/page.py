"""``GET /``: one static page that follows an action's stream (``/?action=<id>``) and reads what its
ids name; it starts nothing.

It opens an ``EventSource`` on ``/streams/actions/<id>``; the browser reconnects by itself with
``Last-Event-ID`` when the server restarts, and the page drops any id it already shows, so the
timeline stays complete and free of duplicates. What it shows follows the action's DisplayPlan
(docs/service.md, "The page"): the boundary summary first, rendered from Markdown into DOM nodes
(every piece of text is a text node: no field can carry markup or script into the page), the
verdicts by claim with bands and confidences to two places, the next tests, the caveats, an
**Incomplete** badge on a partial, the updates offered to the action once it has ended (its stream
is opened with ``?updates=1``, so it stays open past the terminal event for them), and the plan's chips and drawers — the receipts (the plan
bundle's files, browsable), the context pack, the evidence bundle, and the integrity drawer
(``artifacts.integrity``: the log verified and the signed head checked). Artifacts are read over
the ToolBus WebSocket (``artifacts.get``; the page's own ``?token=`` authenticates it, as it does
the stream). ``data-state`` on ``<body>`` says where the page is (``connecting``, ``live``,
``done action_completed`` …) for a test to read. No external asset: style and script are inline.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CDA action</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
:root{--fg:#1d232a;--muted:#5b6570;--line:#d9dee3;--bg:#fff;--panel:#f5f7f9;--hi:#0b6b3a;--mid:#8a5a00;--lo:#a31515;--acc:#1d5fbf}
*{box-sizing:border-box}
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:var(--fg);background:var(--bg)}
header{display:flex;flex-wrap:wrap;gap:.6em 1em;align-items:center;padding:.8em 1.4em;border-bottom:1px solid var(--line);background:var(--panel)}
header h1{font-size:1.05em;margin:0;font-weight:600} header code{font-size:.95em}
main{max-width:62em;margin:0 auto;padding:1em 1.4em 3em}
h2{font-size:1em;margin:1.6em 0 .5em;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.badge{display:inline-block;padding:.1em .6em;border-radius:1em;font-size:.85em;font-weight:600;border:1px solid currentColor}
.badge.live{color:var(--acc)} .badge.completed{color:var(--hi)} .badge.incomplete{color:var(--mid);background:#fff4dc}
.badge.failed{color:var(--lo);background:#fde8e8} .badge.idle,.badge.connecting,.badge.closed,.badge.reconnecting{color:var(--muted)}
#summary{border:1px solid var(--line);border-radius:.4em;padding:.4em 1.2em;background:#fff}
#summary.draft{border-style:dashed} #summary h1{font-size:1.2em} #summary h2{text-transform:none;letter-spacing:0;color:var(--fg);font-size:1.05em}
.note{color:var(--muted);font-style:italic}
table{border-collapse:collapse;width:100%} td,th{border-bottom:1px solid var(--line);padding:.35em .6em;text-align:left;vertical-align:top}
th{font-weight:600;color:var(--muted)} td.num{font-variant-numeric:tabular-nums;text-align:right}
.band{font-weight:600} .band-high{color:var(--hi)} .band-medium{color:var(--mid)} .band-low{color:var(--lo)}
#caveats li{color:var(--mid)} #error{color:var(--lo);font-weight:600}
.chips{display:flex;gap:.5em;flex-wrap:wrap;margin:.6em 0}
button{font:inherit;padding:.25em .8em;border:1px solid var(--line);border-radius:1em;background:#fff;cursor:pointer}
button[aria-expanded="true"]{background:var(--acc);color:#fff;border-color:var(--acc)}
button:focus-visible,input:focus-visible,summary:focus-visible{outline:3px solid #7aa7ee;outline-offset:2px}
.drawer{border:1px solid var(--line);border-radius:.4em;padding:.6em 1em;margin:.6em 0;background:var(--panel)}
.drawer[hidden]{display:none} pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid var(--line);padding:.6em;margin:.4em 0;max-height:28em;overflow:auto}
.files{display:flex;flex-wrap:wrap;gap:.3em;margin:.4em 0} .files button{border-radius:.3em;font-size:.9em}
.ok{color:var(--hi);font-weight:600} .bad{color:var(--lo);font-weight:600} .unknown{color:var(--muted);font-weight:600}
#timeline{font-size:.9em;color:var(--muted)} #timeline li{margin:.1em 0}
form{margin-left:auto}
</style></head>
<body data-state="connecting">
<header><h1>CDA action <code id="action"></code></h1><span id="state" class="badge connecting" role="status" aria-live="polite">connecting</span>
<form id="pick"><label>action <input name="action" placeholder="action id" size="26"></label> <button>follow</button></form></header>
<main>
<p id="error" hidden></p>
<section aria-labelledby="h-summary"><h2 id="h-summary">Boundary summary</h2><div id="summary" class="draft"><p class="note">(no summary yet)</p></div>
<div class="chips" id="chips" role="group" aria-label="details"></div><div id="drawers"></div></section>
<section aria-labelledby="h-verdicts"><h2 id="h-verdicts">Verdicts</h2>
<table><thead><tr><th scope="col">claim</th><th scope="col">status</th><th scope="col">confidence</th><th scope="col">band</th></tr></thead>
<tbody id="verdicts"></tbody></table></section>
<section aria-labelledby="h-caveats" id="caveats-box" hidden><h2 id="h-caveats">Caveats</h2><ul id="caveats"></ul></section>
<section aria-labelledby="h-tests"><h2 id="h-tests">Next tests</h2><ul id="tests"></ul></section>
<section aria-labelledby="h-updates" id="updates-box" hidden><h2 id="h-updates">Updates offered</h2><ul id="updates"></ul></section>
<section aria-labelledby="h-timeline"><h2 id="h-timeline">Timeline</h2><ol id="timeline" start="0"></ol></section>
</main>
<script>
"use strict";
const params = new URLSearchParams(location.search);
const id = params.get("action");
const token = params.get("token");  // a server with --auth: the page's own ?token= opens the stream and the ToolBus
const seen = new Set();
const $ = (x) => document.getElementById(x);
function el(tag, s, cls) { const e = document.createElement(tag); if (s !== undefined && s !== null) e.textContent = String(s); if (cls) e.className = cls; return e; }
function state(s, label, cls) {
  document.body.dataset.state = s; const b = $("state"); b.textContent = label || s; b.className = "badge " + (cls || s.split(" ")[0]);
}
// Markdown to DOM: headings, lists, paragraphs, fenced code, `code`, **strong**, *em*; everything else is text.
function inline(parent, s) {
  const re = /(`[^`]+`|\\*\\*[^*]+\\*\\*|\\*[^*\\s][^*]*\\*)/g; let at = 0, m;
  while ((m = re.exec(s)) !== null) {
    if (m.index > at) parent.append(document.createTextNode(s.slice(at, m.index)));
    const t = m[0];
    if (t[0] === "`") parent.append(el("code", t.slice(1, -1)));
    else if (t.startsWith("**")) parent.append(el("strong", t.slice(2, -2)));
    else parent.append(el("em", t.slice(1, -1)));
    at = m.index + t.length;
  }
  if (at < s.length) parent.append(document.createTextNode(s.slice(at)));
}
function markdown(text) {
  const out = document.createDocumentFragment(); let list = null, para = null, code = null;
  const close = () => { list = null; para = null; };
  for (const line of String(text).split("\\n")) {
    if (code) { if (/^```/.test(line)) { code = null; } else { code.textContent += line + "\\n"; } continue; }
    if (/^```/.test(line)) { close(); code = el("code"); const pre = el("pre"); pre.append(code); out.append(pre); continue; }
    let m;
    if ((m = /^(#{1,6})\\s+(.*)$/.exec(line))) { close(); const h = el("h" + Math.min(6, m[1].length + 1)); inline(h, m[2]); out.append(h); continue; }
    if ((m = /^\\s*(?:[-*]|(\\d+)\\.)\\s+(.*)$/.exec(line))) {
      const kind = m[1] ? "ol" : "ul"; para = null;
      if (!list || list.tagName.toLowerCase() !== kind) { list = el(kind); out.append(list); }
      const li = el("li"); inline(li, m[2]); list.append(li); continue;
    }
    if (!line.trim()) { close(); continue; }
    list = null;
    if (!para) { para = el("p"); out.append(para); } else { para.append(document.createTextNode(" ")); }
    inline(para, line);
  }
  return out;
}
function showSummary(text, draft) {
  const box = $("summary"); box.textContent = ""; box.append(markdown(text)); box.classList.toggle("draft", !!draft);
  box.dataset.draft = draft ? "yes" : "no";
}
// the ToolBus, opened on first use: one WebSocket, requests answered by id
let bus = null, busReady = null, nextId = 1; const waiting = new Map();
function toolbus() {
  if (busReady) return busReady;
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + location.pathname.replace(/[^/]*$/, "") +
              "toolbus" + (token ? "?token=" + encodeURIComponent(token) : "");
  busReady = new Promise((resolve, reject) => {
    bus = new WebSocket(url);
    bus.onopen = () => resolve(bus);
    bus.onerror = () => reject(new Error("the ToolBus could not be reached"));
    bus.onclose = () => { busReady = null; for (const [, w] of waiting) w.reject(new Error("the ToolBus closed")); waiting.clear(); };
    bus.onmessage = (m) => { const f = JSON.parse(m.data); const w = waiting.get(f.id); if (!w) return; waiting.delete(f.id);
      if (f.error) w.reject(new Error(f.error.message || "refused")); else w.resolve(f.result); };
  });
  return busReady;
}
async function callBus(method, p) {
  const ws = await toolbus(); const my = nextId++;
  return new Promise((resolve, reject) => { waiting.set(my, {resolve, reject}); ws.send(JSON.stringify({id: my, method: method, params: p})); });
}
// chips and drawers, as the DisplayPlan names them
const DRAWERS = {
  receipts: {label: "receipts", load: loadReceipts},
  context_pack: {label: "context pack", load: loadContext},
  evidence: {label: "evidence", load: loadEvidence},
  integrity: {label: "integrity", load: loadIntegrity},
};
let final = null;
function drawer(name) {
  const spec = DRAWERS[name] || {label: name, load: (box) => box.append(el("p", "this page does not know how to show " + name, "note"))};
  const btn = el("button", spec.label); btn.type = "button"; btn.id = "chip-" + name; btn.setAttribute("aria-expanded", "false");
  const box = el("div", null, "drawer"); box.id = "drawer-" + name; box.hidden = true; box.setAttribute("role", "region");
  box.setAttribute("aria-label", spec.label); btn.setAttribute("aria-controls", box.id);
  btn.onclick = () => {  // read afresh at each opening: an integrity answer changes once the log is signed
    const open = btn.getAttribute("aria-expanded") !== "true"; btn.setAttribute("aria-expanded", String(open)); box.hidden = !open;
    if (open) { box.textContent = ""; box.dataset.loaded = "loading"; box.append(el("p", "loading…", "note"));
      Promise.resolve(spec.load(box)).then(() => { box.dataset.loaded = "yes"; })
        .catch((e) => { box.textContent = ""; box.append(el("p", "could not load: " + e.message, "bad")); box.dataset.loaded = "error"; })
        .finally(() => { const n = box.querySelector(":scope > p.note"); if (n && n.textContent === "loading…") n.remove(); }); }
  };
  $("chips").append(btn); $("drawers").append(box);
}
function fileBrowser(box, files) {
  const names = Object.keys(files).sort(); const list = el("div", null, "files"); const view = el("pre"); view.hidden = true;
  for (const n of names) { const b = el("button", n); b.type = "button"; b.dataset.file = n;
    b.onclick = () => { let t = files[n]; try { t = JSON.stringify(JSON.parse(t), null, 2); } catch (e) { /* not JSON: as written */ }
      view.textContent = t; view.hidden = false; view.dataset.file = n; };
    list.append(b); }
  box.append(el("p", names.length + " file(s)")); box.append(list); box.append(view);
}
async function planBundle() {
  if (!final || !final.plan_bundle_id) throw new Error("this action has no plan bundle");
  return callBus("artifacts.get", {id: final.plan_bundle_id});
}
async function loadReceipts(box) {
  const r = await planBundle(); const files = {};
  for (const [k, v] of Object.entries(r.files || {})) if (k.startsWith("receipts/")) files[k] = v;
  box.textContent = ""; box.append(el("p", "plan bundle " + r.id));
  const integ = await callBus("artifacts.integrity", {action_id: final.action_id}).catch(() => null);
  if (integ) box.append(el("p", "chain: " + integ.status, integ.status === "intact" ? "ok" : (integ.status === "tampered" ? "bad" : "unknown")));
  fileBrowser(box, files);
  const rest = {}; for (const [k, v] of Object.entries(r.files || {})) if (!k.startsWith("receipts/")) rest[k] = v;
  box.append(el("h3", "the rest of the plan bundle")); fileBrowser(box, rest);
}
async function loadContext(box) {
  const r = await planBundle(); box.textContent = "";
  const text = (r.files || {})["context_pack.json"];
  if (text === undefined) { box.append(el("p", "this action's plan bundle holds no context pack", "note")); return; }
  box.append(el("pre", JSON.stringify(JSON.parse(text), null, 2)));
}
async function loadEvidence(box) {
  if (!final || !final.evidence_bundle_id) throw new Error("this action has no evidence bundle");
  const r = await callBus("artifacts.get", {id: final.evidence_bundle_id}); box.textContent = "";
  box.append(el("p", "evidence bundle " + r.id)); box.append(el("pre", JSON.stringify(r.evidence, null, 2)));
}
async function loadIntegrity(box) {
  const r = await callBus("artifacts.integrity", {action_id: (final && final.action_id) || id}); box.textContent = "";
  const head = el("p"); head.append(el("span", r.status, r.status === "intact" ? "ok" : (r.status === "tampered" ? "bad" : "unknown")));
  head.append(document.createTextNode(" — receipts verify over the log: " + r.log_entries + " entries, head " + r.log_head.slice(0, 16) + "…"));
  box.append(head); box.dataset.status = r.status;
  const dl = el("ul");
  dl.append(el("li", "signed head: " + (r.signed_head ? r.signed_head.slice(0, 16) + "… over " + r.signed_count + " entries" : "none yet")));
  dl.append(el("li", "signature: " + r.signature + (r.signed_by ? " (key " + r.signed_by.slice(0, 16) + "…)" : "")));
  dl.append(el("li", "this action's " + r.action_receipts + " receipts covered by the signed head: " + (r.covered ? "yes" : "no")));
  box.append(dl);
  for (const p of r.problems) box.append(el("p", p, "bad"));
  for (const n of r.notes) box.append(el("p", n, "note"));
}
function outputs(o, extraCaveats) {
  if (!o) return;
  final = o;
  if (o.verdicts) {
    const tb = $("verdicts"); tb.textContent = "";
    for (const v of o.verdicts) {
      const tr = document.createElement("tr"); tr.dataset.hypothesis = v.hypothesis_id;
      tr.append(el("td", v.claim || v.hypothesis_id), el("td", v.status), el("td", v.confidence == null ? "not decided" : Number(v.confidence).toFixed(2), "num"),
                el("td", v.band, "band band-" + v.band));
      tb.append(tr);
    }
  }
  const ul = $("tests"); ul.textContent = "";
  for (const t of o.next_tests || []) ul.append(el("li", t.question));
  const cav = [...(extraCaveats || []), ...(o.caveats || [])].filter((c, i, all) => all.indexOf(c) === i);
  $("caveats").textContent = ""; for (const c of cav) $("caveats").append(el("li", c)); $("caveats-box").hidden = cav.length === 0;
  $("chips").textContent = ""; $("drawers").textContent = "";
  const plan = o.display || {chips: ["receipts", "context_pack"], drawers: {integrity: true}};
  for (const c of plan.chips || []) drawer(c);
  if (o.evidence_bundle_id) drawer("evidence");
  for (const [d, on] of Object.entries(plan.drawers || {})) if (on) drawer(d);
}
function terminal(d) {
  if (d.type === "action_failed") {
    $("error").hidden = false; $("error").textContent = "The action failed: " + d.error;
    const box = $("summary"); box.textContent = ""; box.append(el("p", "no summary: the action failed before it could write one", "note"));
    box.classList.remove("draft"); box.dataset.draft = "no";
    state("done action_failed", "failed", "failed");
  } else if (d.type === "action_partial") {
    outputs(d.outputs, d.caveats);
    if ((!d.outputs || !(d.outputs.next_tests || []).length) && (d.next_tests || []).length) {
      const ul = $("tests"); ul.textContent = ""; for (const t of d.next_tests) ul.append(el("li", t.question)); }
    state("done action_partial", "Incomplete", "incomplete");
  } else { outputs(d.outputs); state("done action_completed", "completed", "completed"); }
  if ($("summary").dataset.draft === "yes" && d.type !== "action_failed") $("summary").classList.remove("draft");
}
function show(ev) {
  if (seen.has(ev.lastEventId)) return;  // a resumed stream never shows an event twice
  seen.add(ev.lastEventId);  // "seq", or "attempt:seq" for a re-run
  const d = JSON.parse(ev.data);
  let what = d.type;
  if (d.type === "action_checkpoint") {
    what += " " + d.kind;
    if (d.kind === "boundary_summary" && d.payload && d.payload.text) showSummary(d.payload.text, !!d.payload.draft);
  } else if (d.type === "action_progress") { what += " " + d.phase; }
  else if (d.type === "action_notice" || d.type === "action_waiting_user") { what += ": " + (d.message || d.reason); }
  else if (d.type === "action_failed") { what += ": " + d.error; }
  else if (d.type === "action_update_available") { what += " " + d.sub_action; }
  const li = el("li", what); li.value = d.seq; li.dataset.id = ev.lastEventId;
  $("timeline").append(li);
  if (d.type === "action_completed" || d.type === "action_partial" || d.type === "action_failed") { terminal(d); }
  else if (d.type === "action_update_available") {
    const u = el("li", "revision " + d.revision + " of a bound sub-action output is offered: " + d.sub_action +
                 " (actions.accept_update re-runs this action on it)");
    u.dataset.subAction = d.sub_action; $("updates").append(u); $("updates-box").hidden = false;
  }
  else { state("live"); }
}
let source = null;
if (id) {
  $("action").textContent = id; document.title = "CDA action " + id;
  // ?updates=1: the stream stays open past the terminal event, for the updates offered to the action
  source = new EventSource("streams/actions/" + encodeURIComponent(id) + "?updates=1" + (token ? "&token=" + encodeURIComponent(token) : ""));
  for (const name of ["action_started", "action_progress", "action_notice", "action_waiting_user", "action_linked",
                      "action_checkpoint", "action_completed", "action_partial", "action_failed", "action_update_available"]) {
    source.addEventListener(name, show);
  }
  source.onerror = () => { if (document.body.dataset.state.startsWith("done")) return;  // ended: only updates may follow
    if (source.readyState === EventSource.CLOSED) state("closed"); else state("reconnecting"); };
} else { state("idle"); }
</script></body></html>
"""
