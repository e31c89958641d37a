#pragma once
/// \file
/// The HTML report's inline style sheet and script. The script builds a value table when its
/// node is first opened (the markup holds none, so that a trace of thousands of values stays
/// light), opens the nodes above a link's target, and gives the plot hover and click. It marks
/// the body with data-ready (milliseconds since navigation) and data-script-ms (its own run)
/// when done: tests and bench/html_report_browser.sh read them. The page puts the script in a CDATA section and the style sheet holds no "<" or
/// "&", so that the page also parses as XML.

namespace tracetorch::detail::html {

inline constexpr const char* kStyle = R"css(
:root{--ok:#2e7d32;--diverges:#c62828;--accepted:#f9a825;--note:#607d8b;--skip:#8d6e63;--abs:#1565c0;--rel:#ef6c00}
body{font:14px/1.4 system-ui,sans-serif;margin:0 1.5em 2em;color:#212121;background:#fff}
h1{font-size:1.4em;margin:.6em 0 .2em}h2{font-size:1.15em;border-bottom:1px solid #ccc;margin-top:1.4em}h3{font-size:1em;margin:.8em 0 .3em}
nav a{margin-right:1em}
table{border-collapse:collapse;font-size:12px;margin:.3em 0}
th,td{border:1px solid #ddd;padding:1px 6px;text-align:left;vertical-align:top}th{background:#f3f3f3}
td{font-family:ui-monospace,monospace;max-width:40em;overflow-wrap:break-word}
tr.s-diverges td:first-child{border-left:4px solid var(--diverges)}tr.s-accepted td:first-child{border-left:4px solid var(--accepted)}
tr.s-not-replayable td:first-child{border-left:4px solid var(--skip)}tr.s-note td:first-child{border-left:4px solid var(--note)}
tr.s-zero{color:#9e9e9e}
.verdict{font-size:1.2em;font-weight:600;padding:.3em .6em;display:inline-block;color:#fff;border-radius:3px}
.verdict.s-ok{background:var(--ok)}.verdict.s-diverges{background:var(--diverges)}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:0 1em;margin:.5em 0}dt{color:#616161}dd{margin:0;font-family:ui-monospace,monospace;overflow-wrap:anywhere}
.counts{display:flex;gap:2em;flex-wrap:wrap}
.legend{font-size:12px}.legend span{margin-right:1.2em;white-space:nowrap}
.sw{display:inline-block;width:12px;height:12px;vertical-align:-2px;margin-right:4px}
.sw-abs{background:var(--abs)}.sw-rel{background:var(--rel)}.sw-diverges{background:var(--diverges)}
.sw-accepted{background:var(--accepted)}.sw-not-replayable{background:var(--skip)}
.plot-box{position:relative;max-width:1100px}
#plot{width:100%;height:auto;display:block;font-size:11px}
#plot .grid{stroke:#e0e0e0;stroke-width:1;fill:none}#plot .ax{text-anchor:end;fill:#616161}#plot .ax-x{text-anchor:middle;fill:#616161}
#plot .ln{fill:none;stroke-width:1;opacity:.45}#plot .pt{fill:none;stroke-width:5;stroke-linecap:round}
#plot .ln-abs,#plot .pt-abs{stroke:var(--abs)}#plot .ln-rel,#plot .pt-rel{stroke:var(--rel)}
#plot .tol{fill:none;stroke-width:1.5;stroke-dasharray:6 3}#plot .tol-abs{stroke:var(--abs)}#plot .tol-rel{stroke:var(--rel)}
#plot .tick{stroke-width:2;fill:none}#plot .tick.s-diverges{stroke:var(--diverges)}#plot .tick.s-accepted{stroke:var(--accepted)}
#plot .tick.s-not-replayable{stroke:var(--skip)}
#plot .first{stroke:var(--diverges);stroke-width:1.5;fill:none}#plot .first-label{fill:var(--diverges);font-weight:600}
#plot #cursor{stroke:#9e9e9e;stroke-width:1}#plot #plot-hit{fill:transparent;cursor:crosshair}
#tip{position:absolute;display:none;pointer-events:none;background:#263238;color:#fff;font-size:12px;padding:3px 6px;border-radius:3px;white-space:nowrap}
#tree details.node{margin-left:1.2em}#tree>details{margin-left:0}
details.node>summary{cursor:pointer;white-space:nowrap}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:5px;background:var(--ok)}
.s-diverges>summary>.dot{background:var(--diverges)}.s-accepted>summary>.dot{background:var(--accepted)}
.s-note>summary>.dot{background:var(--note)}.s-not-replayable>summary>.dot{background:var(--skip)}
.s-diverges>summary>.nm{color:var(--diverges);font-weight:600}
.nm{font-family:ui-monospace,monospace}.tag,.er,.below,.rp{font-size:11px;margin-left:.8em;color:#616161}
.below{color:var(--diverges)}.rp{border:1px solid currentColor;border-radius:3px;padding:0 3px}
.rp.s-diverges{color:var(--diverges)}.rp.s-ok{color:var(--ok)}.rp.s-not-replayable{color:var(--skip)}
.vals{margin-left:1.2em}.vals>summary{cursor:pointer;font-size:12px;color:#616161}.hl>summary{background:#fff59d}
details.group>summary{cursor:pointer;font-weight:600;margin:.5em 0}
)css";

inline constexpr const char* kScript = R"js(
(function () {
  "use strict";
  var started = performance.now();
  var data = JSON.parse(document.getElementById("tt-data").textContent);
  function table(head, rows) {
    var t = document.createElement("table"), tr = t.createTHead().insertRow();
    head.forEach(function (h) { var th = document.createElement("th"); th.textContent = h; tr.appendChild(th); });
    var body = t.createTBody();
    rows.forEach(function (r) {
      var row = body.insertRow();
      row.className = "s-" + r[0];
      for (var i = 1; i !== r.length; i++) row.insertCell().textContent = r[i];
    });
    return t;
  }
  function fill(details) {
    var holders = details.querySelectorAll(":scope > .lazy");
    for (var i = 0; i !== holders.length; i++) {
      var h = holders[i];
      if (!h.firstChild) h.appendChild(table(data.heads[h.dataset.head] || [], data.rows[h.dataset.rows] || []));
    }
  }
  document.addEventListener("toggle", function (e) { if (e.target.open) fill(e.target); }, true);
  document.querySelectorAll("details[open]").forEach(fill);
  function reveal(id) {
    var node = document.getElementById(id);
    if (!node) return;
    for (var p = node; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    document.querySelectorAll(".hl").forEach(function (x) { x.classList.remove("hl"); });
    node.classList.add("hl");
    node.scrollIntoView({block: "center"});
  }
  document.addEventListener("click", function (e) {
    var a = e.target.closest ? e.target.closest("a[href^='#m']") : null;
    if (!a) return;
    e.preventDefault();
    reveal(a.getAttribute("href").slice(1));
  });
  function setAll(selector, open) {
    document.querySelectorAll(selector).forEach(function (d) {
      if (!open) { d.open = false; return; }
      for (var p = d; p; p = p.parentElement) if (p.tagName === "DETAILS") p.open = true;
    });
  }
  var openButton = document.getElementById("open-diverging"), closeButton = document.getElementById("close-all");
  if (openButton) openButton.addEventListener("click", function () { setAll("details.node.s-diverges", true); });
  if (closeButton) closeButton.addEventListener("click", function () { setAll("details.node", false); });
  var svg = document.getElementById("plot"), hit = document.getElementById("plot-hit");
  var tip = document.getElementById("tip"), cursor = document.getElementById("cursor"), frame = data.plot;
  function callAt(e) {
    var point = svg.createSVGPoint();
    point.x = e.clientX;
    point.y = e.clientY;
    var x = point.matrixTransform(svg.getScreenCTM().inverse()).x;
    var i = Math.floor((x - frame.left) / (frame.width - frame.left - frame.right) * data.calls.length);
    return i >= 0 && data.calls.length > i ? i : -1;
  }
  if (svg && hit && data.calls.length) {
    hit.addEventListener("mousemove", function (e) {
      var i = callAt(e);
      if (i === -1) return;
      var c = data.calls[i], node = document.getElementById(c[0]);
      var x = frame.left + (i + 0.5) * (frame.width - frame.left - frame.right) / data.calls.length;
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.setAttribute("visibility", "visible");
      tip.textContent = (node ? node.dataset.path : "?") + (c[1] > 1 ? " (call " + c[1] + ")" : "") +
          ": abs " + c[2] + ", rel " + c[3] + ", " + c[4];
      tip.style.display = "block";
      var box = svg.parentElement.getBoundingClientRect();
      tip.style.left = Math.min(e.clientX - box.left + 12, box.width - tip.offsetWidth) + "px";
      tip.style.top = (e.clientY - box.top + 14) + "px";
    });
    hit.addEventListener("mouseleave", function () { tip.style.display = "none"; cursor.setAttribute("visibility", "hidden"); });
    hit.addEventListener("click", function (e) { var i = callAt(e); if (i !== -1) reveal(data.calls[i][0]); });
  }
  document.body.setAttribute("data-script-ms", String(Math.round(performance.now() - started)));
  document.body.setAttribute("data-ready", String(Math.round(performance.now())));
})();
)js";

}  // namespace tracetorch::detail::html
