//! The HTML timeline: one self-contained file (inline CSS, SVG and script; no network)
//! drawing one row per device and lane, kernels as bars coloured by op type, copies on a
//! lane of their own per destination device with an arrow from the source device, hover
//! text with op, inputs, shapes, dtype, bytes and duration, and the summary on top.

use super::summary::ProfileSummary;
use super::{short_device, Trace};
use crate::error::Result;
use serde_json::{json, Value};

/// Kind of a copy between two devices, from their types.
fn direction(from: &str, to: &str) -> &'static str {
    let gpu = |d: &str| !short_device(d).starts_with("CPU");
    match (gpu(from), gpu(to)) {
        (false, true) => "host to device",
        (true, false) => "device to host",
        (true, true) => "device to device",
        (false, false) => "host to host",
    }
}

/// Renders a timeline (`{"traceEvents": [...]}` in TF's layout) as one HTML page.
///
/// The page holds its data as JSON and draws it with an inline script, so it needs no
/// network and no other file. Elements carry `data-*` attributes for tests: each device row
/// is a `g.device` with `data-device`, each kernel an `rect.op` with `data-name` and
/// `data-op`, each copy an `rect.copy` plus a `line.arrow`. Opening the page with
/// `#selftest=<node name>` hovers that node's bar once drawn and copies the hover text into
/// `<pre id="selftest">`, which headless browsers can dump.
///
/// Errors (`InvalidArgument`) when the value is not a trace.
pub fn render_html(trace: &Value) -> Result<String> {
    let t = Trace::parse(trace)?;
    let summary = ProfileSummary::from_trace(trace)?;
    let (t0, t1) = t.span();
    let ops: Vec<Value> = t
        .events
        .iter()
        .filter(|e| e.copy.is_none())
        .map(|e| {
            json!({"d": e.device, "l": e.lane, "ts": e.ts - t0, "dur": e.dur, "name": e.name, "op": e.op,
                   "inputs": e.inputs, "bytes": e.bytes,
                   "extra": e.extra.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>()})
        })
        .collect();
    let copies: Vec<Value> = t
        .events
        .iter()
        .filter_map(|e| e.copy.map(|(from, to)| (e, from, to)))
        .map(|(e, from, to)| {
            json!({"from": from, "to": to, "ts": e.ts - t0, "dur": e.dur, "name": e.name,
                   "tensor": e.inputs.first().cloned().unwrap_or_default(), "bytes": e.bytes,
                   "kind": direction(&t.devices[from], &t.devices[to])})
        })
        .collect();
    let data = json!({
        "span": t1 - t0,
        "devices": t.devices.iter().map(|d| json!({"name": d, "short": short_device(d)})).collect::<Vec<_>>(),
        "ops": ops,
        "copies": copies,
        "summary": summary,
    });
    // `</` inside a script element would end it early
    let data = data.to_string().replace("</", "<\\/");
    Ok(TEMPLATE.replace("/*DATA*/null", &data))
}

const TEMPLATE: &str = r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Oxiflow timeline</title>
<style>
body { font: 13px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 8px; }
table { border-collapse: collapse; margin: 6px 0 14px; }
th, td { padding: 2px 10px; border-bottom: 1px solid #e4e4e4; text-align: right; white-space: nowrap; }
th:first-child, td:first-child, td.l, th.l { text-align: left; }
th { background: #f4f4f4; font-weight: 600; }
#tl { border: 1px solid #ccc; overflow: hidden; position: relative; user-select: none; }
#tip { position: fixed; display: none; background: #fffff4; border: 1px solid #999; padding: 6px 8px;
       font: 12px/1.35 ui-monospace, monospace; white-space: pre; pointer-events: none; box-shadow: 2px 2px 6px #0003; z-index: 2; }
.lbl { font: 12px ui-monospace, monospace; fill: #333; }
.dev { font-weight: 600; }
.axis { font: 10px ui-monospace, monospace; fill: #666; }
rect.op, rect.copy { stroke: #0005; stroke-width: 0.5; }
rect.op:hover, rect.copy:hover { stroke: #000; stroke-width: 1.5; }
#legend span { display: inline-block; margin: 0 12px 4px 0; }
#legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; border: 1px solid #0004; }
.note { color: #666; }
</style>
</head>
<body>
<h1>Oxiflow timeline</h1>
<div id="summary"></div>
<p class="note">Wheel: zoom. Drag: pan. Double-click: reset. Hover a bar for details.</p>
<div id="legend"></div>
<div id="tl"><svg id="svg" xmlns="http://www.w3.org/2000/svg"></svg></div>
<div id="tip"></div>
<pre id="selftest"></pre>
<script>
"use strict";
const DATA = /*DATA*/null;
const NS = "http://www.w3.org/2000/svg";
const LANE = 20, GAP = 6, LABEL = 170, AXIS = 22;
function el(tag, attrs, parent) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function esc(s) { return String(s).replace(/[&<>"]/g, c => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c])); }
function ms(us) { return (us / 1000).toFixed(3); }
function fmtBytes(b) { return b >= 1048576 ? (b / 1048576).toFixed(2) + " MiB" : b >= 1024 ? (b / 1024).toFixed(1) + " KiB" : b + " B"; }
function fmtTime(us) { return us >= 1000 ? (us / 1000).toFixed(3) + " ms" : us.toFixed(1) + " µs"; }
// a categorical palette (Tableau 20, light and dark pairs split apart), by op type in sorted order
const PALETTE = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#bab0ac",
                 "#a0cbe8", "#ffbe7d", "#8cd17d", "#d4a6c8", "#f1ce63", "#86bcb6", "#fabfd2", "#d7b5a6", "#79706e", "#b6992d", "#499894"];
const OP_TYPES = [...new Set(DATA.ops.map(o => o.op))].sort();
function colour(op) {
  const i = OP_TYPES.indexOf(op);
  return i < 0 ? "#cccccc" : PALETTE[i % PALETTE.length];
}
function summaryHtml() {
  const s = DATA.summary;
  let h = "<p>Step: <b>" + ms(s.span_us) + " ms</b> on " + s.devices.length + " device(s); <b>" + s.copies +
          "</b> cross-device copies, <b>" + s.copy_bytes + "</b> bytes.</p>";
  h += "<table id='devices'><tr><th>device</th><th>ops</th><th>busy ms</th><th>idle ms</th><th>busy %</th>" +
       "<th>copies in</th><th>bytes in</th><th>copy ms</th><th>peak bytes</th></tr>";
  for (const d of s.devices) {
    const pct = s.span_us > 0 ? (100 * d.busy_us / s.span_us).toFixed(1) : "0.0";
    h += "<tr><td>" + esc(d.device) + "</td><td>" + d.ops + "</td><td>" + ms(d.busy_us) + "</td><td>" + ms(d.idle_us) +
         "</td><td>" + pct + "</td><td>" + d.copies_in + "</td><td>" + d.copy_bytes_in + "</td><td>" + ms(d.copy_us) +
         "</td><td>" + (d.peak_bytes === null ? "-" : d.peak_bytes) + "</td></tr>";
  }
  h += "</table><table id='topops'><tr><th>#</th><th class='l'>name</th><th class='l'>op</th><th class='l'>device</th><th>time ms</th></tr>";
  s.top_ops.forEach((o, i) => {
    h += "<tr><td>" + (i + 1) + "</td><td class='l'>" + esc(o.name) + "</td><td class='l'>" + esc(o.op) +
         "</td><td class='l' title='" + esc(o.device) + "'>" + esc(o.device.replace(/^.*\/device:/, "")) + "</td><td>" + ms(o.dur_us) + "</td></tr>";
  });
  return h + "</table>";
}
function opTip(o) {
  const lines = [o.name + "  (" + o.op + ")", "device:   " + DATA.devices[o.d].name, "duration: " + fmtTime(o.dur),
                 "start:    " + fmtTime(o.ts), "bytes:    " + fmtBytes(o.bytes)];
  for (const kv of o.extra) lines.push((kv[0] + ":").padEnd(10) + kv[1]);
  o.inputs.forEach((x, i) => lines.push("input" + i + ":   " + x));
  return lines.join("\n");
}
function copyTip(c) {
  return ["copy " + c.tensor + "  (" + c.kind + ")", "from:     " + DATA.devices[c.from].name, "to:       " + DATA.devices[c.to].name,
          "bytes:    " + fmtBytes(c.bytes), "duration: " + fmtTime(c.dur), "start:    " + fmtTime(c.ts)].join("\n");
}
// layout: per device, its compute lanes then (if it receives copies) one copy lane
const rows = [];
let y = AXIS;
DATA.devices.forEach((d, i) => {
  const lanes = Math.max(1, 1 + Math.max(-1, ...DATA.ops.filter(o => o.d === i).map(o => o.l)));
  const hasCopies = DATA.copies.some(c => c.to === i);
  rows.push({top: y, lanes: lanes, copyY: hasCopies ? y + lanes * LANE : null});
  y += (lanes + (hasCopies ? 1 : 0)) * LANE + GAP;
});
const HEIGHT = y + 4;
let view = {t0: 0, t1: Math.max(DATA.span, 1e-3)};
function draw() {
  const svg = document.getElementById("svg");
  const W = Math.max(600, document.getElementById("tl").clientWidth || 1200);
  svg.setAttribute("width", W); svg.setAttribute("height", HEIGHT);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const k = (W - LABEL - 10) / (view.t1 - view.t0);
  const X = t => LABEL + (t - view.t0) * k;
  el("defs", {}, svg).innerHTML = "<marker id='ah' viewBox='0 0 8 8' refX='7' refY='4' markerWidth='7' markerHeight='7' orient='auto'>" +
    "<path d='M0,0 L8,4 L0,8 z' fill='#c0392b'/></marker>";
  // time axis
  const step = Math.pow(10, Math.floor(Math.log10((view.t1 - view.t0) / 6 || 1)));
  for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
    el("line", {x1: X(t), x2: X(t), y1: AXIS - 4, y2: HEIGHT, stroke: "#eee"}, svg);
    el("text", {x: X(t) + 2, y: AXIS - 8, class: "axis"}, svg).textContent = fmtTime(t);
  }
  DATA.devices.forEach((d, i) => {
    const r = rows[i];
    const g = el("g", {class: "device", "data-device": d.name}, svg);
    const h = (r.lanes + (r.copyY === null ? 0 : 1)) * LANE;
    el("rect", {x: 0, y: r.top, width: W, height: h, fill: i % 2 ? "#fafafa" : "#f3f6fa"}, g);
    el("text", {x: 4, y: r.top + 14, class: "lbl dev"}, g).textContent = d.short;
    for (let l = 1; l < r.lanes; l++) el("text", {x: 14, y: r.top + l * LANE + 14, class: "lbl"}, g).textContent = "lane " + l;
    if (r.copyY !== null) el("text", {x: 14, y: r.copyY + 14, class: "lbl"}, g).textContent = "copies in";
  });
  for (const o of DATA.ops) {
    const r = rows[o.d];
    const w = Math.max(1, o.dur * k);
    const b = el("rect", {class: "op", x: X(o.ts), y: r.top + o.l * LANE + 2, width: w, height: LANE - 4, fill: colour(o.op),
                          "data-name": o.name, "data-op": o.op}, svg);
    b.dataset.tip = opTip(o);
    el("title", {}, b).textContent = b.dataset.tip;
    if (w > 30) {
      const t = el("text", {x: X(o.ts) + 3, y: r.top + o.l * LANE + 14, class: "lbl", "pointer-events": "none"}, svg);
      t.textContent = o.name.length * 7 > w ? o.name.slice(0, Math.max(1, Math.floor(w / 7) - 1)) + "…" : o.name;
    }
  }
  for (const c of DATA.copies) {
    const r = rows[c.to], src = rows[c.from];
    const x0 = X(c.ts), x1 = X(c.ts + c.dur);
    const b = el("rect", {class: "copy", x: x0, y: r.copyY + 3, width: Math.max(1, x1 - x0), height: LANE - 6, fill: "#d62728",
                          "data-name": c.name, "data-tensor": c.tensor, "data-kind": c.kind}, svg);
    b.dataset.tip = copyTip(c);
    el("title", {}, b).textContent = b.dataset.tip;
    el("line", {class: "arrow", x1: x0, y1: src.top + LANE / 2, x2: Math.max(x1, x0 + 2), y2: r.copyY + LANE / 2,
                stroke: "#c0392b", "stroke-width": 1.2, "marker-end": "url(#ah)"}, svg);
  }
}
function legend() {
  document.getElementById("legend").innerHTML = OP_TYPES.map(op => "<span><i style='background:" + colour(op) + "'></i>" + esc(op) + "</span>").join("") +
    (DATA.copies.length ? "<span><i style='background:#e74c3c'></i>copy</span>" : "");
}
const tip = document.getElementById("tip");
function showTip(target, x, y) {
  if (!target || !target.dataset || !target.dataset.tip) { tip.style.display = "none"; return; }
  tip.textContent = target.dataset.tip;
  tip.style.display = "block";
  placeTip(x, y);
}
// next to the pointer, flipped to the other side where it would leave the window
function placeTip(x, y) {
  const w = tip.offsetWidth, h = tip.offsetHeight;
  tip.style.left = (x + 14 + w > window.innerWidth ? Math.max(0, x - 14 - w) : x + 14) + "px";
  tip.style.top = (y + 14 + h > window.innerHeight ? Math.max(0, y - 14 - h) : y + 14) + "px";
}
const svgEl = document.getElementById("svg");
svgEl.addEventListener("mouseover", e => showTip(e.target, e.clientX, e.clientY));
svgEl.addEventListener("mousemove", e => { if (tip.style.display === "block") placeTip(e.clientX, e.clientY); });
svgEl.addEventListener("mouseout", () => { tip.style.display = "none"; });
svgEl.addEventListener("wheel", e => {
  e.preventDefault();
  const W = svgEl.clientWidth || 1200, k = (W - LABEL - 10) / (view.t1 - view.t0);
  const at = view.t0 + (e.offsetX - LABEL) / k, f = e.deltaY < 0 ? 0.8 : 1.25;
  view = {t0: at - (at - view.t0) * f, t1: at + (view.t1 - at) * f};
  draw();
}, {passive: false});
let drag = null;
svgEl.addEventListener("mousedown", e => { drag = {x: e.clientX, v: view}; });
window.addEventListener("mouseup", () => { drag = null; });
window.addEventListener("mousemove", e => {
  if (!drag) return;
  const W = svgEl.clientWidth || 1200, k = (W - LABEL - 10) / (drag.v.t1 - drag.v.t0), dt = (e.clientX - drag.x) / k;
  view = {t0: drag.v.t0 - dt, t1: drag.v.t1 - dt};
  draw();
});
svgEl.addEventListener("dblclick", () => { view = {t0: 0, t1: Math.max(DATA.span, 1e-3)}; draw(); });
window.addEventListener("resize", draw);
document.getElementById("summary").innerHTML = summaryHtml();
legend();
draw();
const m = /#selftest=(.*)$/.exec(location.hash);
if (m) {
  const name = decodeURIComponent(m[1]);
  const bar = [...document.querySelectorAll("rect.op, rect.copy")].find(b => b.getAttribute("data-name") === name);
  if (bar) {
    const r = bar.getBoundingClientRect();
    bar.dispatchEvent(new MouseEvent("mouseover", {bubbles: true, clientX: r.x + 1, clientY: r.y + 1}));
    document.getElementById("selftest").textContent = "hover " + name + "\n" + tip.textContent;
  } else {
    document.getElementById("selftest").textContent = "hover " + name + ": no such bar";
  }
}
</script>
</body>
</html>
"##;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_is_self_contained_and_embeds_the_data() {
        let trace = json!({"traceEvents": [
            {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/job:localhost/replica:0/task:0/device:CPU:0 Compute"}},
            {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "/job:localhost/replica:0/task:0/device:GPU:0 Compute"}},
            {"ph": "X", "cat": "Op", "name": "Sin", "pid": 3, "tid": 0, "ts": 1.0, "dur": 2.0,
             "args": {"name": "Sin</script>", "op": "Sin", "input0": "x", "bytes": 8, "shape": "[]", "dtype": "Float64"}},
            {"ph": "X", "cat": "Copy", "name": "_Recv", "pid": 1, "tid": 0, "ts": 3.0, "dur": 1.0,
             "args": {"name": "Sin/_recv", "op": "_Recv", "input0": "Sin", "bytes": 8,
                      "from": "/job:localhost/replica:0/task:0/device:GPU:0", "to": "/job:localhost/replica:0/task:0/device:CPU:0"}},
        ]});
        let html = render_html(&trace).unwrap();
        assert!(!html.contains("/*DATA*/"));
        // nothing is fetched: no src/href attributes, no imports (the SVG namespace URI is a name)
        for fetch in ["src=", "href=", "@import", "url(http", "fetch("] {
            assert!(!html.contains(fetch), "the page fetches something: {fetch}");
        }
        // the node name cannot close the script element
        assert_eq!(html.matches("</script>").count(), 1);
        assert!(html.contains(r#""kind":"device to host""#));
        assert!(html.contains(r#"["dtype","Float64"]"#));
    }

    #[test]
    fn copy_directions() {
        assert_eq!(direction("/device:CPU:0", "/device:GPU:1"), "host to device");
        assert_eq!(direction("/device:GPU:0", "/device:CPU:0"), "device to host");
        assert_eq!(direction("/device:GPU:0", "/device:GPU:1"), "device to device");
        assert_eq!(direction("/device:CPU:0", "/device:CPU:1"), "host to host");
    }
}
