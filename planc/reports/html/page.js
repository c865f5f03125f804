// planc's page: draws the plan from the JSON in #planc-data (planc.reports.html.data).
// Plain DOM, no library. Every string from the data is set as text, never as markup.
(function () {
  "use strict";

  var data = JSON.parse(document.getElementById("planc-data").textContent);
  var vars = data.variables;
  var col = {};
  vars.columns.forEach(function (name, i) { col[name] = i; });
  var axes = data.mesh.axes;
  var sizes = axes.map(function (a) { return a.size; });
  var deviceCount = data.mesh.devices;
  var meshKnown = axes.length > 0 && sizes.every(function (s) { return s !== null; });

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

  // -- the mesh -----------------------------------------------------------------------------

  // The devices as one grid: each mesh axis goes across or down, whichever split gives
  // the grid nearest a 5:2 landscape (axes in mesh order within each); a gap marks
  // where the outer axis of a side steps. A single long axis wraps at 32.
  function layoutOf() {
    var k = axes.length, best = null;
    for (var mask = 0; mask < (1 << k); mask++) {
      var across = [], down = [];
      for (var j = 0; j < k; j++) { ((mask >> (k - 1 - j)) & 1 ? across : down).push(j); }
      var cols = product(across.map(function (a) { return sizes[a]; }));
      var rows = product(down.map(function (a) { return sizes[a]; }));
      var score = Math.abs(Math.log(cols / rows) - Math.log(2.5));
      if (best === null || score < best.score - 1e-9) {
        best = {score: score, across: across, down: down, cols: cols, rows: rows};
      }
    }
    return best;
  }

  function deviceGrid(parent, cell) {
    var lay = layoutOf();
    var wrapAt = (lay.down.length === 0 && lay.cols > 32) ? 32 : lay.cols;
    var big = deviceCount <= 64;
    var names = function (js) { return js.map(function (j) { return axes[j].name; }).join(" x "); };
    var caption = "across: " + (names(lay.across) || "-") + "; down: " + (names(lay.down) || "-");
    parent.appendChild(el("div", "grid-caption", caption + " (devices numbered in mesh order)"));
    var stepCol = lay.across.length > 1 ? sizes[lay.across[lay.across.length - 1]] : 0;
    var stepRow = lay.down.length > 1 ? sizes[lay.down[lay.down.length - 1]] : 0;
    var sliced = axes.some(function (a) { return a.slices > 1; });
    var grid = el("div", "devices");
    grid.style.gridTemplateColumns = "repeat(" + wrapAt + ", max-content)";
    for (var r = 0; r < lay.rows; r++) {
      for (var c = 0; c < lay.cols; c++) {
        var at = new Array(axes.length), v = r, q;
        for (q = lay.down.length - 1; q >= 0; q--) { at[lay.down[q]] = v % sizes[lay.down[q]]; v = Math.floor(v / sizes[lay.down[q]]); }
        v = c;
        for (q = lay.across.length - 1; q >= 0; q--) { at[lay.across[q]] = v % sizes[lay.across[q]]; v = Math.floor(v / sizes[lay.across[q]]); }
        var d = 0;
        for (q = 0; q < axes.length; q++) { d = d * sizes[q] + at[q]; }
        var info = cell(d, at);
        var cls = "device " + (big ? "big" : "small");
        if (stepCol && c > 0 && c % stepCol === 0) { cls += " gap-left"; }
        if (stepRow && r > 0 && r % stepRow === 0) { cls += " gap-top"; }
        if (sliced && sliceOf(at) % 2) { cls += " slice-odd"; }
        var box = el("div", cls, big ? info.text : null);
        box.title = info.title;
        if (info.color) { box.style.backgroundColor = info.color; }
        box.dataset.device = String(d);
        grid.appendChild(box);
      }
    }
    parent.appendChild(grid);
    return grid;
  }

  function drawMesh() {
    var s = section("mesh");
    if (!axes.length) {
      s.appendChild(el("p", "note", "no mesh: the plan does not resolve one"));
      return;
    }
    var t = el("table", "axes");
    var head = el("tr");
    ["axis", "size", "slices"].forEach(function (h) { head.appendChild(el("th", null, h)); });
    t.appendChild(head);
    axes.forEach(function (a) {
      var tr = el("tr");
      tr.appendChild(el("td", "mono", a.name));
      tr.appendChild(el("td", "mono", a.size === null ? "auto" : a.size));
      tr.appendChild(el("td", "mono", a.slices));
      t.appendChild(tr);
    });
    s.appendChild(t);
    if (!meshKnown) {
      s.appendChild(el("p", "note", data.mesh.note));
      return;
    }
    var sliced = axes.some(function (a) { return a.slices > 1; });
    s.appendChild(el("p", "note", deviceCount + " devices" +
      (sliced ? "; devices of odd slices have dashed borders" : "")));
    deviceGrid(s, function (d, c) {
      var all = c.map(function (v, k) { return k; });
      return {text: String(d), color: null,
              title: "device " + d + ": " + coordText(c, all) + (sliced ? " (slice " + sliceOf(c) + ")" : "")};
    });
  }

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

  // -- the variables table --------------------------------------------------------------

  var rows = vars.rows;
  var layouts = vars.layouts, shapes = vars.shapes, rules = vars.rules, dtypes = vars.dtypes;
  var itemised = col.memory !== undefined;
  var MARK = ["", "W", "E"];

  // Each column: header, the cell's text, and the sort key.
  function cellOf(r, key) {
    var v = r[col[key]];
    switch (key) {
      case "problem": return MARK[v];
      case "shape": case "shard": return v === null ? "?" : shapeText(shapes[v]);
      case "dtype": return dtypes[v];
      case "layout": case "state_layout": return v === null ? "-" : layouts[v].text;
      case "rule": return v === null ? "-" : rules[v];
      case "per_device": case "bytes": case "state_per_device": case "device_bytes":
      case "host_bytes": return human(v);
      default: return v;
    }
  }

  function sortKey(r, key) {
    var v = r[col[key]];
    switch (key) {
      case "shape": case "shard": return v === null ? -1 : product(shapes[v]);
      case "dtype": return dtypes[v];
      case "layout": case "state_layout": return v === null ? "" : layouts[v].text;
      case "rule": return v === null ? "" : rules[v];
      case "per_device": case "bytes": case "state_per_device": case "device_bytes":
      case "host_bytes": return v === null ? -1 : v;
      default: return v;
    }
  }

  var COLUMNS = [["problem", "!"], ["path", "variable"], ["shape", "shape"], ["dtype", "dtype"],
    ["layout", "layout"], ["shard", "shard"], ["per_device", "per device"], ["bytes", "total"],
    ["rule", "rule"]];
  if (itemised) {
    COLUMNS = COLUMNS.concat([["memory", "memory"], ["state_layout", "state layout"],
      ["state_per_device", "a slot per device"], ["device_bytes", "device, with slots"],
      ["host_bytes", "host, with slots"]]);
  }
  var NUMERIC = {shape: 1, shard: 1, per_device: 1, bytes: 1, state_per_device: 1,
                 device_bytes: 1, host_bytes: 1};
  var hasLayouts = rows.some(function (r) { return r[col.layout] !== null; });
  var hasProblems = rows.some(function (r) { return r[col.problem] > 0; });
  if (!hasLayouts) {
    COLUMNS = COLUMNS.filter(function (c) { return c[0] === "path" || c[0] === "shape" || c[0] === "dtype"; });
  } else if (!hasProblems) {
    COLUMNS = COLUMNS.filter(function (c) { return c[0] !== "problem"; });
  }

  // The table holds every row in the DOM up to FULL rows; past that it draws the rows in
  // view (and a margin) between two spacers, so a large model opens as fast as a small one.
  var FULL = 5000, ROW = 22, MARGIN = 60;
  var windowed = rows.length > FULL;
  var trs = new Array(rows.length), haystack = [], shownRows = [], order = [];
  var selected = null, sortState = null, drawn = null;
  var tbody, wrap, countText, filterInput, problemsOnly, topPad, bottomPad;

  function rowElement(i) {
    if (trs[i]) { return trs[i]; }
    var r = rows[i];
    var tr = el("tr");
    tr.dataset.index = String(i);
    tr.tabIndex = 0;
    COLUMNS.forEach(function (c) {
      var key = c[0], text = cellOf(r, key);
      var cls = key === "path" ? "path" : NUMERIC[key] ? "num" : "";
      if (key === "problem") { cls = "mark-" + (text || "none"); }
      if (key === "layout" && text === "replicated") { cls = "replicated"; }
      tr.appendChild(el("td", cls, text));
    });
    if (i === selected) { tr.setAttribute("aria-selected", "true"); }
    trs[i] = tr;
    return tr;
  }

  function spacer() {
    var tr = el("tr", "spacer");
    tr.appendChild(el("td"));
    tr.firstChild.colSpan = COLUMNS.length;
    return tr;
  }

  function drawVariables() {
    var s = section("variables");
    var controls = el("div", "controls");
    filterInput = el("input");
    filterInput.type = "search";
    filterInput.id = "filter";
    filterInput.placeholder = "filter by path or rule";
    filterInput.setAttribute("aria-label", "filter the variables by path or rule");
    controls.appendChild(filterInput);
    var label = el("label");
    problemsOnly = el("input");
    problemsOnly.type = "checkbox";
    problemsOnly.id = "problems-only";
    label.appendChild(problemsOnly);
    label.appendChild(document.createTextNode(" only variables with problems"));
    if (hasProblems) { controls.appendChild(label); }
    countText = el("span", "dim");
    countText.id = "count";
    controls.appendChild(countText);
    s.appendChild(controls);
    if (!hasLayouts && rows.length) {
      s.appendChild(el("p", "note", "no layouts: the plan does not fit this device count (see the diagnostics)"));
    }
    wrap = el("div", "table-wrap");
    var table = el("table", "vars");
    table.id = "vars";
    var thead = el("thead");
    var htr = el("tr");
    COLUMNS.forEach(function (c) {
      var th = el("th");
      th.dataset.key = c[0];
      var b = el("button", null, c[1]);
      b.type = "button";
      b.addEventListener("click", function () { sortBy(c[0], th); });
      th.appendChild(b);
      htr.appendChild(th);
    });
    thead.appendChild(htr);
    table.appendChild(thead);
    tbody = el("tbody");
    topPad = spacer();
    bottomPad = spacer();
    rows.forEach(function (r, i) {
      order.push(i);
      var rule = r[col.rule];
      haystack.push((r[col.path] + "\n" + (rule === null ? "" : rules[rule])).toLowerCase());
    });
    tbody.addEventListener("click", function (e) {
      var tr = e.target.closest("tr");
      if (tr && tr.dataset.index) { select(Number(tr.dataset.index), false); }
    });
    tbody.addEventListener("keydown", function (e) {
      var tr = e.target.closest("tr");
      if (tr && tr.dataset.index && (e.key === "Enter" || e.key === " ")) {
        e.preventDefault();
        select(Number(tr.dataset.index), false);
      }
    });
    table.appendChild(tbody);
    wrap.appendChild(table);
    s.appendChild(wrap);
    var pending = false;
    function later(f) {
      return function () {
        if (pending) { return; }
        pending = true;
        window.requestAnimationFrame(function () { pending = false; f(); });
      };
    }
    filterInput.addEventListener("input", later(applyFilter));
    problemsOnly.addEventListener("change", applyFilter);
    if (windowed) { wrap.addEventListener("scroll", later(function () { drawRows(false); })); }
    applyFilter();
  }

  // Shown: the rows whose path or rule holds the filter's text (any case), and with
  // "only problems", those marked E or W; in the sorted order.
  function applyFilter() {
    var q = filterInput.value.toLowerCase();
    var onlyProblems = problemsOnly.checked;
    shownRows = order.filter(function (i) {
      return (!q || haystack[i].indexOf(q) >= 0) && (!onlyProblems || rows[i][col.problem] > 0);
    });
    countText.textContent = shownRows.length + " of " + rows.length + " variables" +
      (windowed ? " (drawn as they scroll into view)" : "");
    drawRows(true);
  }

  function drawRows(changed) {
    var from = 0, to = shownRows.length;
    if (windowed) {
      var span = Math.ceil(wrap.clientHeight / ROW) + 2 * MARGIN;
      // The scroll position may be past the end of a list the filter just shortened.
      from = Math.max(0, Math.min(Math.floor(wrap.scrollTop / ROW) - MARGIN,
                                  shownRows.length - span));
      to = Math.min(shownRows.length, from + span);
      if (!changed && drawn && drawn[0] === from && drawn[1] === to) { return; }
    }
    drawn = [from, to];
    var frag = document.createDocumentFragment();
    topPad.style.height = (from * ROW) + "px";
    bottomPad.style.height = ((shownRows.length - to) * ROW) + "px";
    if (windowed) { frag.appendChild(topPad); }
    for (var k = from; k < to; k++) { frag.appendChild(rowElement(shownRows[k])); }
    if (windowed) { frag.appendChild(bottomPad); }
    tbody.textContent = "";
    tbody.appendChild(frag);
  }

  function sortBy(key, th) {
    var dir = sortState && sortState.key === key && sortState.dir === 1 ? -1 : 1;
    sortState = {key: key, dir: dir};
    var keys = rows.map(function (r) { return sortKey(r, key); });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x < y) { return -dir; }
      if (x > y) { return dir; }
      return a - b;
    });
    Array.prototype.forEach.call(th.parentNode.children, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    applyFilter();
  }

  // -- the blocks of one variable -----------------------------------------------------------

  function select(i, scroll) {
    if (selected !== null && trs[selected]) { trs[selected].removeAttribute("aria-selected"); }
    selected = i;
    var at = shownRows.indexOf(i);
    if (scroll && windowed && at >= 0) {
      wrap.scrollTop = Math.max(0, at * ROW - wrap.clientHeight / 2);
      drawRows(false);
    }
    if (trs[i]) {
      trs[i].setAttribute("aria-selected", "true");
      if (scroll) { trs[i].scrollIntoView({block: "nearest"}); }
    }
    drawBlocks(i);
  }

  function drawBlocks(i) {
    var s = section("blocks");
    while (s.childNodes.length > 1) { s.removeChild(s.lastChild); }
    var r = rows[i];
    var shape = shapes[r[col.shape]];
    var layout = r[col.layout] === null ? null : layouts[r[col.layout]];
    var box = el("div");
    box.id = "selected";
    s.appendChild(box);
    box.appendChild(el("h3", "mono", r[col.path]));
    var line = shapeText(shape) + " " + dtypes[r[col.dtype]];
    if (layout) { line += "   layout " + layout.text + "   shard " + cellOf(r, "shard") + "   " + human(r[col.per_device]) + " per device"; }
    box.appendChild(el("p", "mono", line));
    if (!layout) { box.appendChild(el("p", "note", "no layout: the plan does not fit")); return; }
    if (!meshKnown) { box.appendChild(el("p", "note", "an `auto` axis has no size: pass --devices to see the blocks")); return; }
    var at = {};
    axes.forEach(function (a, k) { at[a.name] = k; });
    // Per dimension: the mesh positions of its axes (major to minor) and its shard count.
    var dims = shape.map(function (n, d) {
      var ks = (layout.axes[d] || []).map(function (name) { return at[name]; });
      var parts = product(ks.map(function (k) { return sizes[k]; }));
      return {ks: ks, parts: parts, size: Math.floor(n / parts)};
    });
    var total = product(dims.map(function (d) { return d.parts; }));
    function blockOf(c) {
      var id = 0;
      var b = dims.map(function (d) {
        var v = 0;
        d.ks.forEach(function (k) { v = v * sizes[k] + c[k]; });
        return v;
      });
      b.forEach(function (v, d) { id = id * dims[d].parts + v; });
      return {id: id, b: b};
    }
    function rangeText(b) {
      return "[" + dims.map(function (d, j) {
        return d.parts > 1 ? (b[j] * d.size) + ":" + ((b[j] + 1) * d.size) : ":";
      }).join(", ") + "]";
    }
    var holders = [], blockAt = [];
    for (var dv = 0; dv < deviceCount; dv++) {
      var bl = blockOf(coords(dv));
      if (!holders[bl.id]) { holders[bl.id] = {b: bl.b, devices: []}; }
      holders[bl.id].devices.push(dv);
      blockAt.push(bl.id);
    }
    var copies = deviceCount / total;
    box.appendChild(el("p", "note", total === 1
      ? (shape.length ? "not split: every device holds the whole variable" : "a scalar: every device holds it")
      : total + " blocks, each held by " + copies + " device" + (copies === 1 ? "" : "s")));
    if (total > 1) {
      box.appendChild(el("h3", null, "the variable, split into its blocks"));
      tensorGrid(box, dims, holders, rangeText);
    }
    box.appendChild(el("h3", null, "the devices, coloured by the block they hold"));
    deviceGrid(box, function (d, c) {
      var h = holders[blockAt[d]];
      return {text: total > 1 ? String(blockAt[d]) : String(d), color: hue(blockAt[d]),
              title: "device " + d + " holds block " + blockAt[d] + " " + rangeText(h.b)};
    });
    var list = el("table", "blocklist");
    var head = el("tr");
    ["block", "index ranges", "devices"].forEach(function (x) { head.appendChild(el("th", null, x)); });
    list.appendChild(head);
    var LIST = 64;
    holders.slice(0, LIST).forEach(function (h, id) {
      var tr = el("tr");
      var sw = el("td", "mono", String(id));
      sw.style.backgroundColor = hue(id);
      tr.appendChild(sw);
      tr.appendChild(el("td", "mono", rangeText(h.b)));
      tr.appendChild(el("td", "mono", h.devices.length > 16
        ? h.devices.slice(0, 16).join(", ") + ", ... (" + h.devices.length + ")"
        : h.devices.join(", ")));
      list.appendChild(tr);
    });
    box.appendChild(list);
    if (holders.length > LIST) { box.appendChild(el("p", "note", "and " + (holders.length - LIST) + " more blocks")); }
  }

  // The split dimensions as a 2-D grid: the last dimension across, the one before it
  // down, alternating outward, so a matrix reads as it is written and any rank fits.
  function tensorGrid(parent, dims, holders, rangeText) {
    var rank = dims.length, across = [], down = [];
    dims.forEach(function (d, j) {
      if (d.parts > 1) { ((rank - 1 - j) % 2 === 0 ? across : down).push(j); }
    });
    var nCols = product(across.map(function (j) { return dims[j].parts; }));
    var nRows = product(down.map(function (j) { return dims[j].parts; }));
    if (nCols * nRows > 1024) {
      parent.appendChild(el("p", "note", nCols * nRows + " blocks: too many to draw; the devices below show each one"));
      return;
    }
    function digits(index, js) {
      var out = {};
      for (var q = js.length - 1; q >= 0; q--) {
        var n = dims[js[q]].parts;
        out[js[q]] = index % n;
        index = Math.floor(index / n);
      }
      return out;
    }
    function head(js, v) {
      return js.map(function (j) {
        return "dim " + j + " = " + (v[j] * dims[j].size) + ":" + ((v[j] + 1) * dims[j].size);
      }).join(", ");
    }
    var grid = el("div", "tensor");
    grid.id = "tensor";
    grid.style.gridTemplateColumns = "max-content repeat(" + nCols + ", minmax(44px, max-content))";
    grid.appendChild(el("div", "head", ""));
    // Many columns: their headings run upwards, a column each.
    var colHead = nCols > 8 ? "head up" : "head";
    for (var c = 0; c < nCols; c++) { grid.appendChild(el("div", colHead, head(across, digits(c, across)))); }
    for (var r = 0; r < nRows; r++) {
      var rv = digits(r, down);
      grid.appendChild(el("div", "head", head(down, rv) || "all"));
      for (c = 0; c < nCols; c++) {
        var cv = digits(c, across);
        var id = 0;
        dims.forEach(function (d, j) {
          var v = d.parts > 1 ? (j in cv ? cv[j] : rv[j]) : 0;
          id = id * d.parts + v;
        });
        var h = holders[id];
        var cell = el("div", "block", h.devices.length <= 4
          ? "d" + h.devices.join(" d") : h.devices.length + " devices");
        cell.style.backgroundColor = hue(id);
        cell.title = "block " + id + " " + rangeText(h.b) + " on devices " + h.devices.join(", ");
        grid.appendChild(cell);
      }
    }
    parent.appendChild(grid);
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

  // Past 64 devices the mesh takes the page's width, the memory goes below it.
  if (deviceCount > 64) { document.querySelector("main").classList.add("wide-mesh"); }
  drawMesh();
  drawMemory();
  drawCollectives();
  drawVariables();
  drawLargest();
  drawDiagnostics();
  var blocks = section("blocks");
  if (!rows.length) {
    blocks.hidden = true;
  } else if (data.selected !== null) {
    select(data.selected, true);
  } else {
    blocks.appendChild(el("p", "note", "select a variable in the table to see which device holds which block of it"));
  }
  document.body.dataset.ready = "true";
}());
