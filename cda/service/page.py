"""``GET /``: one static page that follows an action's stream (``/?action=<id>``); no API behind it.

The page starts nothing. It opens an ``EventSource`` on ``/streams/actions/<id>``; the browser
reconnects by itself with ``Last-Event-ID`` when the server restarts, and the page drops any id it
already shows, so the timeline stays complete and free of duplicates. It shows the checkpoints as
a timeline, the latest boundary summary, the verdicts with their confidence bands and the next
tests. ``data-state`` on ``<body>`` says where it is (connecting, live, done) for a test to read.
"""

from __future__ import annotations

__all__ = ["PAGE"]

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>CDA action</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;max-width:60em;color:#222}
h1{font-size:1.2em} h2{font-size:1em;margin-top:1.2em}
#timeline li{margin:.1em 0} .kind{font-weight:600} .band-high{color:#06623b} .band-medium{color:#8a5a00}
.band-low{color:#a31515} pre{white-space:pre-wrap;background:#f6f6f6;padding:.6em} table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}
</style></head>
<body data-state="connecting">
<h1>CDA action <code id="action"></code> <span id="state">connecting</span></h1>
<form id="pick"><input name="action" placeholder="action id" size="30"> <button>follow</button></form>
<h2>Boundary summary</h2><pre id="summary">(none yet)</pre>
<h2>Verdicts</h2><table><thead><tr><th>hypothesis</th><th>status</th><th>confidence</th><th>band</th></tr></thead>
<tbody id="verdicts"></tbody></table>
<h2>Next tests</h2><ul id="tests"></ul>
<h2>Timeline</h2><ol id="timeline" start="0"></ol>
<script>
"use strict";
const params = new URLSearchParams(location.search);
const id = params.get("action");
const seen = new Set();
const $ = (x) => document.getElementById(x);
function state(s) { document.body.dataset.state = s; $("state").textContent = s; }
function text(tag, s, cls) { const e = document.createElement(tag); e.textContent = s; if (cls) e.className = cls; return e; }
function outputs(o) {
  if (!o) return;
  const tb = $("verdicts"); tb.textContent = "";
  for (const v of o.verdicts || []) {
    const tr = document.createElement("tr");
    tr.append(text("td", v.hypothesis_id), text("td", v.status), text("td", String(v.confidence)),
              text("td", v.band, "band-" + v.band));
    tb.append(tr);
  }
  const ul = $("tests"); ul.textContent = "";
  for (const t of o.next_tests || []) ul.append(text("li", t.question));
}
function show(ev) {
  if (seen.has(ev.lastEventId)) return;  // a resumed stream never shows an event twice
  seen.add(ev.lastEventId);  // "seq", or "attempt:seq" for a re-run
  const d = JSON.parse(ev.data);
  const n = d.seq;
  let what = d.type;
  if (d.type === "action_checkpoint") {
    what += " " + d.kind;
    if (d.kind === "boundary_summary" && d.payload && d.payload.text) $("summary").textContent = d.payload.text;
  } else if (d.type === "action_progress") { what += " " + d.phase; }
  else if (d.type === "action_notice" || d.type === "action_waiting_user") { what += ": " + (d.message || d.reason); }
  else if (d.type === "action_failed") { what += ": " + d.error; }
  const li = text("li", what); li.value = n; li.dataset.id = ev.lastEventId;
  $("timeline").append(li);
  if (d.type === "action_completed" || d.type === "action_partial" || d.type === "action_failed") {
    outputs(d.outputs); state("done " + d.type); source.close();
  } else { state("live"); }
}
let source = null;
if (id) {
  $("action").textContent = id;
  const token = params.get("token");  // a server with --auth: the page's own ?token= opens the stream
  source = new EventSource("streams/actions/" + encodeURIComponent(id) + (token ? "?token=" + encodeURIComponent(token) : ""));
  for (const name of ["action_started", "action_progress", "action_notice", "action_waiting_user", "action_linked",
                      "action_checkpoint", "action_completed", "action_partial", "action_failed"]) {
    source.addEventListener(name, show);
  }
  source.onerror = () => { if (source.readyState === EventSource.CLOSED) { if (!document.body.dataset.state.startsWith("done")) state("closed"); } else state("reconnecting"); };
} else { state("idle"); }
</script></body></html>
"""
