// planc's page, part 1 of 3: the data, the helpers, the header, memory, collectives and
// diagnostics. planc.reports.html.page joins page.js, devices.js and table.js, in that
// order, inside one function: the page's one script. Plain DOM, no library: every string
// from the data (planc.reports.html.data) is set as text, never as markup.
"use strict";

var data = JSON.parse(document.getElementById("planc-data").textContent);
var vars = data.variables;
var col = {};
vars.columns.forEach(function (name, i) { col[name] = i; });
var axes = data.mesh.axes;
var sizes = axes.map(function (a) { return a.size; });
var deviceCount = data.mesh.devices;
var meshKnown = axes.length > 0 && sizes.every(function (s) { return s !== null; });
// A mesh too large to draw device by device has a note instead (data.py's MAX_DRAWN).
var meshDrawn = meshKnown && !data.mesh.note;
var rows = vars.rows;
var layouts = vars.layouts, shapes = vars.shapes, rules = vars.rules, dtypes = vars.dtypes;

// -- helpers --------------------------------------------------------------------------

function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) { e.className = cls; }
  if (text !== undefined && text !== null) { e.textContent = String(text); }
  return e;
}

function section(id) { return document.getElementById(id); }

// As planc.resolve.memory.human_bytes: binary units, three significant digits.
function human(n) {
  if (n === null || n === undefined) { return "?"; }
  if (n < 1024) { return Math.floor(n) + " B"; }
  var units = ["KiB", "MiB", "GiB", "TiB", "PiB"];
  var value = n, unit = "";
  for (var i = 0; i < units.length; i++) {
    value /= 1024;
    unit = units[i];
    if (value < 1024) { break; }
  }
  if (value < 10) { return value.toFixed(2) + " " + unit; }
  if (value < 100) { return value.toFixed(1) + " " + unit; }
  return value.toFixed(0) + " " + unit;
}

function shapeText(shape) {
  if (shape === null || shape === undefined) { return "?"; }
  return "[" + shape.join(", ") + "]";
}

function product(list) {
  var p = 1;
  for (var i = 0; i < list.length; i++) { p *= list[i]; }
  return p;
}

// A device's coordinates in the mesh: row-major, the last axis fastest.
function coords(device) {
  var out = new Array(sizes.length);
  for (var k = sizes.length - 1; k >= 0; k--) {
    out[k] = device % sizes[k];
    device = Math.floor(device / sizes[k]);
  }
  return out;
}

// A device's slice: an axis over N slices holds slice after slice, as
// create_hybrid_device_mesh places them.
function sliceOf(c) {
  var s = 0;
  for (var k = 0; k < axes.length; k++) {
    var n = axes[k].slices;
    if (n > 1) { s = s * n + Math.floor(c[k] / (sizes[k] / n)); }
  }
  return s;
}

function coordText(c, ks) {
  return ks.map(function (k) { return axes[k].name + "=" + c[k]; }).join(", ");
}

// Distinct colours for block ids: golden-angle hues.
function hue(id) { return "hsl(" + ((id * 137.508) % 360).toFixed(1) + ", 62%, 78%)"; }

// -- the header -------------------------------------------------------------------------

var facts = document.getElementById("facts");
data.facts.forEach(function (f) {
  facts.appendChild(el("dt", null, f[0]));
  facts.appendChild(el("dd", null, f[1]));
});

// -- memory -----------------------------------------------------------------------------

var KINDS = {parameters: 1, state: 1, arguments: 1, outputs: 1, temporaries: 1, code: 1};

function kindClass(kind) { return "k-" + (KINDS[kind] ? kind : "other"); }

function drawMemory() {
  var s = section("memory");
  var bars = data.memory.bars;
  var scale = 1;
  bars.forEach(function (b) {
    var total = b.parts.reduce(function (t, p) { return t + p.bytes; }, 0);
    scale = Math.max(scale, total, b.budget || 0, b.peak || 0);
  });
  var grid = el("div", "bars");
  var legend = {};
  bars.forEach(function (b) {
    var total = b.parts.reduce(function (t, p) { return t + p.bytes; }, 0);
    grid.appendChild(el("div", null, b.label));
    var track = el("div", "track");
    var segs = el("div", "segs");
    b.parts.forEach(function (p) {
      var seg = el("div", "seg " + kindClass(p.kind));
      seg.style.width = (100 * p.bytes / scale) + "%";
      seg.title = p.label + ": " + human(p.bytes);
      segs.appendChild(seg);
      legend[p.kind + "\n" + p.label] = p;
    });
    track.appendChild(segs);
    var shown = b.peak !== null ? b.peak : total;
    if (b.peak !== null) { marker(track, b.peak, scale, "peak " + human(b.peak), "peak"); }
    if (b.budget !== null) {
      marker(track, b.budget, scale, "budget " + human(b.budget), shown > b.budget ? "over" : "");
    }
    grid.appendChild(track);
    var text = el("div", "bar-total", (b.peak !== null ? "peak " + human(b.peak) : human(total)));
    if (b.budget !== null) {
      var verdict = shown > b.budget ? "OVER BUDGET" : "fits";
      text.appendChild(el("span", shown > b.budget ? "over-text" : "dim",
        " of " + human(b.budget) + ": " + verdict));
    }
    grid.appendChild(text);
  });
  s.appendChild(grid);
  var lg = el("div", "legend");
  Object.keys(legend).sort().forEach(function (key) {
    var p = legend[key];
    var item = el("span");
    item.appendChild(el("span", "swatch " + kindClass(p.kind)));
    item.appendChild(document.createTextNode(p.label));
    lg.appendChild(item);
  });
  if (bars.length) { s.appendChild(lg); }
  data.memory.notes.forEach(function (n) { s.appendChild(el("p", "note", n)); });
}

function marker(track, value, scale, label, cls) {
  var m = el("div", "marker " + cls);
  m.style.left = (100 * value / scale) + "%";
  m.title = label;
  var l = el("div", "marker-label", label);
  m.appendChild(l);
  track.appendChild(m);
}

// -- collectives and largest arguments (aot) --------------------------------------------

function axesText(c) {
  if (c.axes === null) { return "(groups not read)"; }
  if (!c.axes.length) { return "-"; }
  return c.axes.length === 1 ? c.axes[0] : "(" + c.axes.join(", ") + ")";
}

function plainTable(headers, rows, numeric) {
  var t = el("table", "plain");
  var tr = el("tr");
  headers.forEach(function (h) { tr.appendChild(el("th", null, h)); });
  t.appendChild(tr);
  rows.forEach(function (r) {
    var row = el("tr");
    r.forEach(function (v, i) {
      if (v instanceof Node) {
        var td = el("td", numeric[i] ? "num" : "mono");
        td.appendChild(v);
        row.appendChild(td);
      } else {
        row.appendChild(el("td", numeric[i] ? "num mono" : "mono", v));
      }
    });
    t.appendChild(row);
  });
  return t;
}

function bytesBar(n, most) {
  var span = el("span", null, human(n));
  var bar = el("span", "minibar");
  bar.style.width = Math.round(160 * n / Math.max(most, 1)) + "px";
  var wrap = el("span");
  wrap.appendChild(span);
  wrap.appendChild(bar);
  return wrap;
}

// As planc.reports.cost.seconds_text: 120 ms, 85.2 us.
function seconds(s) {
  if (s >= 1) { return s.toPrecision(3) + " s"; }
  if (s >= 1e-3) { return (s * 1e3).toPrecision(3) + " ms"; }
  return (s * 1e6).toPrecision(3) + " us";
}

function drawCost() {
  if (!data.cost) { return; }
  var c = data.cost, s = section("cost");
  s.hidden = false;
  s.appendChild(plainTable(["", "seconds per step"], c.time.map(function (t) {
    return [t[0], t[1] === null ? "unknown" : seconds(t[1])];
  }), [false, true]));
  s.appendChild(el("p", "note", "MFU " + c.mfu + " on " + c.chip +
    "; calibration: " + c.calibration +
    (c.exact ? "" : "; a loop's trip count is unknown: every figure a lower bound")));
  if (!c.bottleneck.length) { return; }
  s.appendChild(el("h3", null, "bottleneck (share of the upper bound)"));
  s.appendChild(plainTable(["share", "term", "seconds", "variables", "rules"],
    c.bottleneck.map(function (b) {
      return [b.share, b.term, seconds(b.seconds),
              b.variables.slice(0, 3).join(", ") + (b.variables.length > 3 ? " ..." : ""),
              b.rules.join("; ")];
    }), [true, false, true, false, false]));
}

// The pipeline's stages (`stages`): what each carries, the bubble, the imbalance; on the
// aot and cost pages, each position's analytic figures beside the compiled peak.
function drawStages() {
  if (!data.stages) { return; }
  var p = data.stages, s = section("stages");
  s.hidden = false;
  s.appendChild(el("p", "note", p.summary));
  if (p.positions) {
    var maybe = function (n) { return n === null || n === undefined ? "-" : human(n); };
    s.appendChild(plainTable(["position", "stages", "params and state (analytic)",
                              "plan.pipeline's loop (analytic)", "peak (compiled)",
                              "difference", "activations under the schedule"],
      p.positions.map(function (r) {
        var diff = r.analytic_peak ? ((r.analytic_peak / r.peak - 1) * 100).toFixed(1) + "%"
                                   : "-";
        return [String(r.position), r.stages.join(", "), maybe(r.analytic_bytes),
                maybe(r.analytic_peak), human(r.peak), diff,
                maybe(r.schedule_activation_bytes)];
      }), [true, false, true, true, true, true, true]));
    return;
  }
  var most = Math.max.apply(null, p.rows.map(function (r) { return r.param_bytes || 0; }));
  s.appendChild(plainTable(["stage", "position", "layers", "variables", "params per device",
                            "state per device", "FLOPs per token", "in flight"],
    p.rows.map(function (r) {
      return [String(r.stage), String(r.position), r.layers, String(r.variables),
              r.param_bytes === null ? "?" : bytesBar(r.param_bytes, most),
              r.state_bytes === null ? "-" : human(r.state_bytes),
              r.flops_per_token.toLocaleString("en-US"), String(r.in_flight)];
    }), [true, true, false, true, false, true, true, true]));
}

function drawCollectives() {
  if (data.collectives === null) { return; }
  var s = section("collectives");
  s.hidden = false;
  var cs = data.collectives;
  if (!cs.length) {
    s.appendChild(el("p", "note", "none: the step runs no collective"));
    return;
  }
  var most = Math.max.apply(null, cs.map(function (c) { return c.bytes; }));
  s.appendChild(el("h3", null, "by kind and mesh axes"));
  s.appendChild(plainTable(["kind", "mesh axes", "count", "bytes per device", "group"],
    cs.map(function (c) {
      return [c.kind, axesText(c), c.count + " x", bytesBar(c.bytes, most),
              c.group_size === null ? "-" : c.group_size + " devices"];
    }), [false, false, true, false, true]));
  var byAxes = {};
  cs.forEach(function (c) {
    var key = axesText(c);
    byAxes[key] = (byAxes[key] || 0) + c.bytes;
  });
  var keys = Object.keys(byAxes).sort();
  var top = Math.max.apply(null, keys.map(function (k) { return byAxes[k]; }));
  s.appendChild(el("h3", null, "by mesh axes, every kind"));
  s.appendChild(plainTable(["mesh axes", "bytes per device"],
    keys.map(function (k) { return [k, bytesBar(byAxes[k], top)]; }), [false, false]));
}

function drawLargest() {
  if (data.largest === null) { return; }
  var s = section("largest");
  s.hidden = false;
  [["by variable", "argument", data.largest.by_variable],
   ["by the rule that laid them out", "rule", data.largest.by_rule]].forEach(function (part) {
    if (!part[2].length) { return; }
    s.appendChild(el("h3", null, part[0]));
    var most = part[2][0][1];
    s.appendChild(plainTable(["bytes per device", part[1]], part[2].map(function (e) {
      return [bytesBar(e[1], most), e[0]];
    }), [false, false]));
  });
}

// -- diagnostics --------------------------------------------------------------------------

function drawDiagnostics() {
  var s = section("diagnostics");
  if (!data.diagnostics.length) {
    s.appendChild(el("p", "note", "none"));
    return;
  }
  var ul = el("ul", "diags");
  data.diagnostics.forEach(function (d) {
    var li = el("li", d.severity);
    var top = el("div");
    top.appendChild(el("span", "sev", d.severity + "[" + d.code + "]"));
    top.appendChild(el("span", "msg", d.message));
    li.appendChild(top);
    if (d.where) { li.appendChild(el("div", "where", d.where)); }
    d.help.forEach(function (h) { li.appendChild(el("div", "help", "help: " + h)); });
    ul.appendChild(li);
  });
  s.appendChild(ul);
  if (data.more_diagnostics) {
    s.appendChild(el("p", "note", "and " + data.more_diagnostics + " more: the text and JSON reports list every one"));
  }
}
