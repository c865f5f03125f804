// planc's page, part 2 of 3 (see page.js): the mesh's devices, and a selected variable's
// blocks on them.

// -- the mesh -----------------------------------------------------------------------------

// The devices as one grid: each mesh axis goes across or down, whichever split gives
// the grid nearest a 5:2 landscape (axes in mesh order within each); a gap marks
// where the outer axis of a side steps. A single long row wraps at 32.
// Axes of size 1 change no grid: only the others are tried (at most 12 of them, as the
// page draws at most 4,096 devices), so the search is 2^12 splits at most.
function layoutOf() {
  var live = [], best = null;
  axes.forEach(function (a, j) { if (sizes[j] > 1) { live.push(j); } });
  var k = live.length;
  for (var mask = 0; mask < (1 << k); mask++) {
    var across = [], down = [];
    for (var j = 0; j < k; j++) { ((mask >> (k - 1 - j)) & 1 ? across : down).push(live[j]); }
    var nCols = product(across.map(function (a) { return sizes[a]; }));
    var nRows = product(down.map(function (a) { return sizes[a]; }));
    var score = Math.abs(Math.log(nCols / nRows) - Math.log(2.5));
    if (best === null || score < best.score - 1e-9) {
      best = {score: score, across: across, down: down, cols: nCols, rows: nRows};
    }
  }
  return best;
}

function deviceGrid(parent, cell) {
  var lay = layoutOf();
  var wrapAt = (lay.rows === 1 && lay.cols > 32) ? 32 : lay.cols;
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
      var at = axes.map(function () { return 0; }), v = r, q;  // size-1 axes stay at 0
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
  if (!meshDrawn) {
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

// -- the blocks of one variable -----------------------------------------------------------

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
  if (!meshDrawn) { box.appendChild(el("p", "note", data.mesh.note)); return; }
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

// The split dimensions as a 2-D grid: the last split dimension across, the split one
// before it down, alternating outward, so a matrix reads as it is written and any rank
// fits.
function tensorGrid(parent, dims, holders, rangeText) {
  // Alternating over the split dimensions only, last first (docs/html.md): a 3-D
  // variable split on its first and last dimensions is a grid, not one long row.
  var split = [], across = [], down = [];
  dims.forEach(function (d, j) { if (d.parts > 1) { split.push(j); } });
  split.forEach(function (j, n) { ((split.length - 1 - n) % 2 === 0 ? across : down).push(j); });
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
