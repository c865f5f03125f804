// planc's page, part 3 of 3 (see page.js): the variables table, then the drawing of the
// whole page.

// -- the variables table --------------------------------------------------------------

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

function select(i, scroll) {
  if (selected !== null && trs[selected]) { trs[selected].removeAttribute("aria-selected"); }
  selected = i;
  var at = shownRows.indexOf(i);
  // The table scrolls to the row (rows are ROW high), the page stays where it is.
  if (scroll && at >= 0) {
    wrap.scrollTop = Math.max(0, at * ROW - wrap.clientHeight / 2);
    if (windowed) { drawRows(false); }
  }
  if (trs[i]) { trs[i].setAttribute("aria-selected", "true"); }
  drawBlocks(i);
}

// Past 64 devices the mesh takes the page's width, the memory goes below it.
if (deviceCount > 64) { document.querySelector("main").classList.add("wide-mesh"); }
drawMesh();
drawMemory();
drawCost();
drawStages();
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
