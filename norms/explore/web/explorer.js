/* The book's explorers on the static website, without a kernel.
 * Project code (no third-party code). norms/web/__init__.py explains the design;
 * this file is inlined into each explorer's text/html output by norms.explore.web.html().
 *
 * An explorer is a div.norms-explorer holding its payload in a
 * script element of type application/json,
 * and NormsExplorer.mount(div) builds its controls, figure (SVG) and numbers.
 * Kinds: "reduction" (statistic ids computed from the rule table that norms.axes
 * exports, checked against norms.axes.statistic_index by tests/test_web.py),
 * "states" (every state precomputed by norms: figure data, info HTML, error HTML).
 *
 * Every word it shows comes from the payload (norms' tr() templates, in the catalogs):
 * {"en": ..., "zh": ...} (or one language, when the reader set one in Python); it shows the
 * language norms.i18n.js_language() gave the container (data-lang), else the page's <html lang>.
 */
(function () {
  "use strict";
  if (window.NormsExplorer) { window.NormsExplorer.mountAll(); return; }
  var SVGNS = "http://www.w3.org/2000/svg";

  function el(tag, attrs, parent, text) {
    var e = document.createElement(tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function sv(tag, attrs, parent, text) {
    var e = document.createElementNS(SVGNS, tag);
    for (var k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function escapeHtml(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }
  function pyTuple(a) { return a.length === 1 ? "(" + a[0] + ",)" : "(" + a.join(", ") + ")"; }
  function pyRepr(s) {  // Python's repr of a str, for the shapes a reader types
    return s.indexOf("'") >= 0 && s.indexOf('"') < 0 ? '"' + s + '"' : "'" + s.replace(/\\/g, "\\\\").replace(/'/g, "\\'") + "'";
  }
  // A payload's text in one language: {"en": ..., "zh": ...}, or a plain string (the same in both).
  function pick(x, lang) {
    if (x === null || typeof x !== "object") return x;
    return x[lang] !== undefined ? x[lang] : x.en;
  }
  function languageOf(root) {
    if (root.dataset.lang) return root.dataset.lang;
    var l = (document.documentElement.lang || "").toLowerCase();
    return l.indexOf("zh") === 0 ? "zh" : "en";
  }
  function prod(a) { return a.reduce(function (x, y) { return x * y; }, 1); }

  /* ------------------------------------------------------------------ *
   * Reduction: which elements share a statistic                         *
   * ------------------------------------------------------------------ */

  // norms.explore.state.parse_shape, same messages (w: its templates, payload.text, one language).
  function parseShape(text, w) {
    if (!/^[\s,()\[\]x×*0-9]*$/.test(text))
      throw ["ValueError", fill2(w.shape_unreadable, { text: pyRepr(text) })];
    var words = text.match(/\d+/g) || [];
    words.forEach(function (d) {  // as norms.explore.state.parse_shape (MAX_SIZE, MAX_RANK)
      if (d.replace(/^0+/, "").length > 7 || parseInt(d, 10) > 1000000)
        throw ["ValueError", fill2(w.shape_too_large, { got: d.length <= 12 ? d :
          fill2(w.shape_long_number, { head: d.slice(0, 6), digits: d.length }) })];
    });
    if (words.length > 8) throw ["ValueError", fill2(w.shape_too_many_dims, { got: words.length })];
    var sizes = words.map(function (s) { return parseInt(s, 10); });
    if (!sizes.length) throw ["ValueError", w.shape_empty];
    if (sizes.indexOf(0) >= 0) throw ["ValueError", fill2(w.shape_zero, { got: pyTuple(sizes) })];
    return sizes;
  }

  function fill(template, shape) { return template.split("{shape}").join(pyTuple(shape)); }

  // The rule for (norm, shape, groups, lastDims) from the table norms.explore.web exports from
  // norms.axes.describe; throws [type, message] exactly where the kernel version does.
  function reductionRule(d, norm, shape, groups, lastDims) {
    var r = shape.length, key;
    if (norm === "GroupNorm" && r >= 2) {
      var e = d.errors["GroupNorm|C" + shape[1] + "|G" + groups];
      if (e) throw [e[0], fill(e[1], shape)];
    }
    key = (norm === "LayerNorm" || norm === "RMSNorm") ? norm + "|" + r + "|" + lastDims : norm + "|" + r;
    if (d.errors[key]) throw [d.errors[key][0], fill(d.errors[key][1], shape)];
    if (!d.rules[key]) throw ["ValueError", "no rule for " + key];
    return d.rules[key];
  }

  // Statistic id of every element, row-major: ids run row-major over the kept dims
  // (GroupNorm's channel dim in blocks of C / groups), as norms.axes.statistic_index.
  function statisticIndex(rule, shape, groups) {
    var total = prod(shape), ids = new Array(total), r = shape.length;
    var factors = rule.kept.map(function (dim) {
      var block = dim === rule.group_dim ? shape[dim] / groups : 1;
      return { dim: dim, block: block, extent: shape[dim] / block };
    });
    var strides = new Array(r), s = 1;
    for (var i = r - 1; i >= 0; i--) { strides[i] = s; s *= shape[i]; }
    for (var flat = 0; flat < total; flat++) {
      var id = 0;
      for (var f = 0; f < factors.length; f++) {
        var x = Math.floor(flat / strides[factors[f].dim]) % shape[factors[f].dim];
        id = id * factors[f].extent + Math.floor(x / factors[f].block);
      }
      ids[flat] = id;
    }
    var count = prod(factors.map(function (f) { return f.extent; }));
    var reduced = [];
    for (var dim = 0; dim < r; dim++) {
      var kept = rule.kept.indexOf(dim) >= 0;
      if (!kept || (dim === rule.group_dim && shape[dim] / groups > 1)) reduced.push(dim);
    }
    return {
      ids: ids, count: count, per: total / count, reduced: reduced,
      param_shape: rule.param_dims === null ? null : rule.param_dims.map(function (p) { return shape[p]; }),
      has_mean: rule.has_mean, eval_differ: rule.eval_differ
    };
  }

  // norms.explore.state.stat_html: w holds its template and words (payload.text, one language)
  function statHtml(s, w) {
    return fill2(w.stat, { count: s.count, what: s.has_mean ? w.means : w.rms, per: s.per,
      dims: pyTuple(s.reduced), params: s.param_shape === null ? w.none : pyTuple(s.param_shape),
      eval_note: s.eval_differ ? w.yes : w.no });
  }

  // An error template of the payload: the explorer picked its language when it started
  // (Explorer), a harness that calls foldView alone gets the English.
  function message(d, key) { return pick(d.messages[key], "en"); }

  // norms.plots.reductions._image_view / _sequence_view / _check_size: the ids folded to (a, b, c).
  function foldView(d, norm, shape, layout) {
    var r = shape.length, sp = d.spatial_names[String(r - 2)], view;
    if (prod(shape) > d.limits.max_cells)
      throw ["ValueError", fill2(message(d, "too_many_elements"), { shape: pyTuple(shape), cells: prod(shape),
        max_cells: d.limits.max_cells })];
    if (layout === "auto") layout = (norm === "LayerNorm" || norm === "RMSNorm") && r <= 3 ? "sequence" : "image";
    if (layout === "sequence") {
      if (r === 3) view = { kind: "panels", grid: shape.slice(), labels: ["b", "T", "D"] };
      else if (r === 2) view = { kind: "panels", grid: [1, shape[0], shape[1]], labels: [null, "T", "D"] };
      else if (r === 1) view = { kind: "panels", grid: [1, 1, shape[0]], labels: [null, null, "D"] };
      else throw ["ValueError", message(d, "sequence_rank").split("{ndim}").join(String(r))];
    } else if (r === 1) {
      view = { kind: "panels", grid: [1, 1, shape[0]], labels: [null, null, "C"] };
    } else if (/^InstanceNorm\dd$/.test(norm) && r === parseInt(norm.charAt(12), 10) + 1) {
      var spu = d.spatial_names[String(r - 1)];
      view = { kind: "block", grid: [1, shape[0], prod(shape.slice(1))], labels: [null, "C", spu.join("·")] };
    } else if (r === 2) {
      view = { kind: "panels", grid: [1, shape[0], shape[1]], labels: [null, "N", "C"] };
    } else {
      view = { kind: "block", grid: [shape[0], shape[1], prod(shape.slice(2))], labels: ["N", "C", sp.join("·")] };
    }
    var g = view.grid, total = prod(g), lim = d.limits[view.kind];
    if (total > d.limits.max_cells || g[0] > lim[0] || g[1] > lim[1] || g[2] > lim[2]) {
      var m = message(d, "too_many_cells"), vals = {
        a: g[0], b: g[1], c: g[2], total: total, max_cells: d.limits.max_cells, la: lim[0], lb: lim[1], lc: lim[2]
      };
      for (var k in vals) m = m.split("{" + k + "}").join(String(vals[k]));
      throw ["ValueError", m];
    }
    return view;
  }

  // norms.plots.reductions._tint_indices: neighbouring statistics get different tints.
  function tintIndices(ids, grid, count, ntints) {
    var adjacent = {}, a = grid[0], b = grid[1], c = grid[2];
    function link(i, j) {
      if (i === j) return;
      (adjacent[i] = adjacent[i] || {})[j] = true;
      (adjacent[j] = adjacent[j] || {})[i] = true;
    }
    for (var p = 0; p < a; p++) for (var y = 0; y < b; y++) for (var x = 0; x < c; x++) {
      var at = (p * b + y) * c + x;
      if (p + 1 < a) link(ids[at], ids[at + b * c]);
      if (y + 1 < b) link(ids[at], ids[at + c]);
      if (x + 1 < c) link(ids[at], ids[at + 1]);
    }
    var tint = new Array(count);
    for (var sid = 0; sid < count; sid++) {
      var taken = {};
      for (var j in adjacent[sid] || {}) if (+j < sid) taken[tint[+j]] = true;
      tint[sid] = sid % ntints;
      for (var k = 0; k < ntints; k++) {
        var t = (sid + k) % ntints;
        if (!taken[t]) { tint[sid] = t; break; }
      }
    }
    return tint;
  }

  function drawReduction(box, d, st, view, highlight, title, words) {
    var g = view.grid, a = g[0], b = g[1], c = g[2];
    // the panels wrap onto rows to fit the column (a phone's too), the legend onto two lines
    var room = Math.max(300, Math.min(640, (box.clientWidth || 640) - 4));
    var cell = Math.max(9, Math.min(28, Math.floor(300 / Math.max(c, b * 0.8)), Math.floor(640 / (a * c + 1))));
    var gap = 18, left = view.labels[1] ? 30 : 8, top = 40, pw = c * cell, ph = b * cell;
    var cols = Math.max(1, Math.min(a, Math.floor((room - left) / (pw + gap))));
    var rows = Math.ceil(a / cols), twoLines = room < 480;
    var width = Math.max(left + cols * (pw + gap), twoLines ? 300 : 480);
    var height = top + rows * (ph + 44) - 12 + (twoLines ? 46 : 30);
    var svg = sv("svg", { viewBox: "0 0 " + width + " " + height, width: width, role: "img", class: "norms-reduction",
      style: "max-width:100%;height:auto", "aria-label": title }, box);
    sv("text", { x: 4, y: 14, class: "ne-title" }, svg, title);
    var tints = tintIndices(st.ids, g, st.count, d.tints.length);
    for (var p = 0; p < a; p++) {
      var ox = left + (p % cols) * (pw + gap), oy = top + Math.floor(p / cols) * (ph + 44);
      if (view.labels[0]) sv("text", { x: ox, y: oy - 7, class: "ne-label" }, svg, view.labels[0] + " = " + p);
      for (var y = 0; y < b; y++) for (var x = 0; x < c; x++) {
        var sid = st.ids[(p * b + y) * c + x];
        sv("rect", { x: ox + x * cell, y: oy + y * cell, width: cell, height: cell, "data-stat": sid,
          fill: sid === highlight ? d.highlight_color : d.tints[tints[sid]],
          stroke: sid === highlight ? d.highlight_edge : "#404040", "stroke-width": sid === highlight ? 1.6 : 0.6 }, svg);
      }
      if (view.labels[2]) sv("text", { x: ox + pw / 2, y: oy + ph + 16, class: "ne-label", "text-anchor": "middle" }, svg,
        view.labels[2] + " →");
      if (view.labels[1] && p % cols === 0) sv("text", { x: ox - 6, y: oy + ph / 2, class: "ne-label", "text-anchor": "end",
        "dominant-baseline": "middle" }, svg, view.labels[1] + " ↓");
    }
    var ly = height - (twoLines ? 24 : 8);
    sv("rect", { x: 4, y: ly - 11, width: 13, height: 13, fill: d.highlight_color, stroke: d.highlight_edge }, svg);
    sv("text", { x: 22, y: ly, class: "ne-label" }, svg, fill2(words.highlighted, { index: highlight }));
    sv("text", { x: twoLines ? 4 : 200, y: twoLines ? ly + 18 : ly, class: "ne-label" }, svg, words.legend);
  }

  function renderReduction(ex) {
    var d = ex.payload.data, v = ex.values(), w = ex.text;
    var shape, rule, st, view;
    ex.setDisabled("groups", v.norm !== "GroupNorm");
    ex.setDisabled("last_dims", v.norm !== "LayerNorm" && v.norm !== "RMSNorm");
    try {
      shape = parseShape(v.shape, w);
      var g = d.grid;
      if (shape.length > g.max_rank || shape[0] > g.max_first || (shape.length > 1 && shape[1] > g.max_second) ||
          shape.slice(2).some(function (s) { return s > g.max_other; }))
        return ex.outside(fill2(w.outside, { shape: pyTuple(shape) }));
      rule = reductionRule(d, v.norm, shape, +v.groups, +v.last_dims);
      st = statisticIndex(rule, shape, +v.groups);
      view = foldView(d, v.norm, shape, v.layout);
    } catch (err) {
      if (!Array.isArray(err)) throw err;
      return ex.fail(err[0], err[1]);
    }
    ex.setRange("highlight", 0, st.count - 1);
    var highlight = Math.min(+ex.values().highlight, st.count - 1);
    var title = fill2(w.title, { module: moduleTitle(v.norm, shape, +v.groups, +v.last_dims), shape: pyTuple(shape) });
    ex.show(statHtml(st, w), function (box) { drawReduction(box, d, st, view, highlight, title, w); },
      { shape: shape, ids: st.ids, highlight: highlight });
  }

  /* ------------------------------------------------------------------ *
   * Charts for precomputed states (line, scatter, strip panels)         *
   * ------------------------------------------------------------------ */

  function niceTicks(lo, hi, n) {
    var span = hi - lo || 1, step = Math.pow(10, Math.floor(Math.log10(span / n)));
    [1, 2, 2.5, 5, 10].some(function (m) { if (span / (step * m) <= n) { step *= m; return true; } return false; });
    var ticks = [];
    for (var t = Math.ceil(lo / step) * step; t <= hi + 1e-9 * span; t += step) ticks.push(+t.toFixed(10));
    return ticks;
  }

  var ENTRY = 128;  // the width of one legend entry (units)
  function legendRowsOf(panel, w) {
    var perRow = Math.max(1, Math.floor((w - 16) / ENTRY));
    return Math.ceil(panel.series.filter(function (s) { return s.label; }).length / perRow);
  }

  // legendRows: the same for every panel of a chart, so that their plots are the same height
  function drawPanel(svg, panel, ox, oy, w, h, legendRows) {
    var xs = [], ys = [];
    panel.series.forEach(function (s) {
      if (s.y) ys = ys.concat(s.y);
      if (s.x) xs = xs.concat(s.x);
      else if (s.y && s.type !== "hline") xs.push(0, s.y.length - 1);
    });
    if (panel.xlim) xs = panel.xlim.slice();
    var xlog = panel.xscale === "log2", fx = function (x) { return xlog ? Math.log2(x) : x; };
    var x0 = Math.min.apply(null, xs.map(fx)), x1 = Math.max.apply(null, xs.map(fx));
    var y0 = Math.min.apply(null, ys), y1 = Math.max.apply(null, ys);
    var pad = (y1 - y0) * 0.06 || 0.5; y0 -= pad; y1 += pad;
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    // points and markers keep their whole dot inside the frame
    var dots = panel.series.some(function (s) { return s.type === "scatter" || s.marker; });
    if (dots && !panel.xlim) { var xpad = (x1 - x0) * 0.06; x0 -= xpad; x1 += xpad; }
    // the legend sits under the panel, in rows, never over the data
    var labelled = panel.series.filter(function (s) { return s.label; });
    var perRow = Math.max(1, Math.floor((w - 16) / ENTRY));
    var L = 48, B = 42 + 15 * legendRows, T = 20, R = 14, pw = w - L - R, ph = h - B - T;
    var X = function (x) { return ox + L + (fx(x) - x0) / (x1 - x0) * pw; };
    var Y = function (y) { return oy + T + (1 - (y - y0) / (y1 - y0)) * ph; };
    sv("rect", { x: ox + L, y: oy + T, width: pw, height: ph, fill: "none", stroke: "#999" }, svg);
    var clipId = "ne-clip-" + (++clipCount), clip = sv("clipPath", { id: clipId }, sv("defs", {}, svg));
    sv("rect", { x: ox + L, y: oy + T, width: pw, height: ph }, clip);
    var data = sv("g", { "clip-path": "url(#" + clipId + ")" }, svg);
    sv("text", { x: ox + L + pw / 2, y: oy + 13, class: "ne-label", "text-anchor": "middle" }, svg, panel.title || "");
    niceTicks(y0, y1, 5).forEach(function (t) {
      sv("text", { x: ox + L - 4, y: Y(t) + 4, class: "ne-tick", "text-anchor": "end" }, svg, String(t));
      sv("line", { x1: ox + L - 3, x2: ox + L, y1: Y(t), y2: Y(t), stroke: "#999" }, svg);
    });
    var xt = panel.xticks ? panel.xticks.map(function (t, i) { return [t, panel.xticklabels ? panel.xticklabels[i] : String(t)]; })
      : niceTicks(x0, x1, 4).map(function (t) { return [t, String(t)]; });
    xt.forEach(function (t) {
      var lines = String(t[1]).split("\n");
      lines.forEach(function (line, i) {
        sv("text", { x: X(t[0]), y: oy + T + ph + 14 + 12 * i, class: "ne-tick", "text-anchor": "middle" }, svg, line);
      });
    });
    if (panel.xlabel) sv("text", { x: ox + L + pw / 2, y: oy + T + ph + 34, class: "ne-tick", "text-anchor": "middle" }, svg, panel.xlabel);
    if (panel.ylabel) sv("text", { x: ox + 11, y: oy + T + ph / 2, class: "ne-tick", "text-anchor": "middle",
      transform: "rotate(-90 " + (ox + 11) + " " + (oy + T + ph / 2) + ")" }, svg, panel.ylabel);
    var entry = 0;
    panel.series.forEach(function (s) {
      var dash = s.dash ? { "stroke-dasharray": s.dash } : {};
      if (s.type === "hline") {
        sv("line", Object.assign({ x1: ox + L, x2: ox + L + pw, y1: Y(s.y[0]), y2: Y(s.y[0]), stroke: s.color, "stroke-width": 1 }, dash), data);
      } else if (s.type === "line") {
        var pts = s.y.map(function (y, i) { return X(s.x ? s.x[i] : i).toFixed(1) + "," + Y(y).toFixed(1); });
        sv("polyline", Object.assign({ points: pts.join(" "), fill: "none", stroke: s.color, "stroke-width": 1.5 }, dash), data);
        if (s.marker) s.y.forEach(function (y, i) { sv("circle", { cx: X(s.x[i]), cy: Y(y), r: 2.6, fill: s.color }, data); });
      } else if (s.type === "scatter") {
        s.y.forEach(function (y, i) {
          sv("circle", { cx: X(s.x[i]), cy: Y(y), r: s.r || 2.2, fill: s.color, "fill-opacity": 0.6 }, data);
        });
      }
      if (s.label) {
        var lx = ox + 8 + (entry % perRow) * ENTRY, ly = oy + T + ph + 52 + 15 * Math.floor(entry / perRow);
        sv("line", Object.assign({ x1: lx, x2: lx + 14, y1: ly - 3, y2: ly - 3, stroke: s.color, "stroke-width": 1.5 }, dash), svg);
        sv("text", { x: lx + 18, y: ly, class: "ne-tick" }, svg, s.label);
        entry += 1;
      }
    });
  }

  var clipCount = 0;

  // A title's lines, at most `most` narrow characters each (about 7 units a character, a CJK
  // one counting two): broken between words, and between CJK characters (no spaces there).
  var CJK = /[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]/;
  function textWidth(t) { var n = 0; for (var i = 0; i < t.length; i++) n += CJK.test(t.charAt(i)) ? 2 : 1; return n; }
  function wrapTitle(title, most) {
    if (CJK.test(title)) most = Math.floor(most * 0.85);  // Latin letters are wider in a CJK font
    var lines = [], piece = /(\s*)([\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]|[^\s\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]+)/g, m;
    while ((m = piece.exec(title)) !== null) {
      var last = lines.length ? lines[lines.length - 1] : null, next = (m[1] ? " " : "") + m[2];
      if (last !== null && textWidth(last + next) <= most) lines[lines.length - 1] = last + next;
      else lines.push(m[2]);
    }
    return lines;
  }

  function drawChart(box, chart) {
    // panels side by side, or stacked where the column is narrow (a phone: one column)
    var n = chart.panels.length, w = 270;
    var cols = Math.max(1, Math.min(n, Math.floor((box.clientWidth || 700) / 240)));
    var legendRows = Math.max.apply(null, chart.panels.map(function (p) { return legendRowsOf(p, w); }));
    var h = 200 + 15 * legendRows;
    var lines = wrapTitle(chart.title || "", Math.floor(cols * w / 8));
    var top = lines.length ? 8 + 16 * lines.length : 0;
    var rows = Math.ceil(n / cols), width = cols * w, height = top + rows * h;
    var svg = sv("svg", { viewBox: "0 0 " + width + " " + height, width: "100%", role: "img", class: "norms-chart",
      style: "max-width:" + Math.round(width * 1.25) + "px",
      "aria-label": chart.title || "figure" }, box);
    lines.forEach(function (line, i) {
      sv("text", { x: width / 2, y: 15 + 16 * i, class: "ne-title", "text-anchor": "middle" }, svg, line);
    });
    chart.panels.forEach(function (p, i) {
      drawPanel(svg, p, (i % cols) * w, top + Math.floor(i / cols) * h, w, h, legendRows);
    });
  }

  function fill2(template, vals) {
    return template.replace(/\{(\w+)\}/g, function (m, k) { return k in vals ? String(vals[k]) : m; });
  }
  function fmtList(v) { return "[" + v.map(function (x) { return x.toFixed(2); }).join(", ") + "]"; }
  var f32 = Math.fround;

  // BatchNorm1d's running statistics (norms.functional.batch_norm's update, in float32)
  // over the batch statistics norms computed, then train vs eval output on the fresh batch.
  function runningStats(d, run, momentum, steps, b) {
    var F = d.features, rm = [], rv = [], means = [[]], vars = [[]];
    for (var f = 0; f < F; f++) { rm.push(0); rv.push(1); means[0].push(0); vars[0].push(1); }
    for (var t = 1; t <= steps; t++) {
      var m = momentum === null ? 1 / t : momentum, keep = f32(1 - m), take = f32(m);
      for (f = 0; f < F; f++) {
        rm[f] = f32(f32(rm[f] * keep) + f32(run.mean[(t - 1) * F + f] * take));
        rv[f] = f32(f32(rv[f] * keep) + f32(run["var"][(t - 1) * F + f] * take));
      }
      means.push(rm.slice()); vars.push(rv.slice());
    }
    var x = run.fresh[String(steps)], train = [], evalOut = [], gap = 0;
    for (f = 0; f < F; f++) {
      var mu = 0, v = 0, i;
      for (i = 0; i < b; i++) mu += x[i * F + f];
      mu /= b;
      for (i = 0; i < b; i++) v += (x[i * F + f] - mu) * (x[i * F + f] - mu);
      v /= b;
      var tr = [], ev = [];
      for (i = 0; i < b; i++) {
        tr.push((x[i * F + f] - mu) / Math.sqrt(v + d.eps));
        ev.push((x[i * F + f] - rm[f]) / Math.sqrt(rv[f] + d.eps));
        gap = Math.max(gap, Math.abs(tr[i] - ev[i]));
      }
      train.push(tr); evalOut.push(ev);
    }
    return { means: means, vars: vars, rm: rm, rv: rv, train: train, evalOut: evalOut, gap: gap };
  }

  function column(rows, f) { return rows.map(function (r) { return r[f]; }); }

  function renderRunningStats(ex) {
    var d = ex.payload.data, v = ex.values(), w = ex.text;
    ex.setDisabled("momentum", v.cumulative);
    var key = v.batch_size + "|" + v.seed;
    if (d.errors[key]) return ex.failHtml(d.errors[key]);
    var run = d.runs[key];
    if (!run || !run.fresh[String(v.steps)]) return ex.outside(w.outside);
    var momentum = v.cumulative ? null : v.momentum, r = runningStats(d, run, momentum, v.steps, v.batch_size);
    var info = fill2(w.info, { steps: v.steps, running_mean: fmtList(r.rm), true_mean: fmtList(d.true_mean),
      running_var: fmtList(r.rv), true_var: fmtList(d.true_var), max_gap: r.gap.toFixed(3) });
    var panels = [["running_mean", r.means, d.true_mean], ["running_var", r.vars, d.true_var]].map(function (p, i) {
      var series = [];
      for (var f = 0; f < d.features; f++) {
        series.push({ type: "line", y: column(p[1], f), color: d.colors[f], label: i === 0 ? fill2(w.feature, { index: f }) : null });
        series.push({ type: "hline", y: [p[2][f]], color: d.colors[f], dash: "4 3" });
      }
      if (i === 0) series.push({ type: "hline", y: [p[2][0]], color: d.colors[0], dash: "4 3", label: w.true_value });
      return { title: p[0], xlabel: w.step, series: series };
    });
    var all = [].concat.apply([], r.train.concat(r.evalOut));
    var lo = Math.min.apply(null, all), hi = Math.max.apply(null, all), sc = [];
    for (var f = 0; f < d.features; f++) sc.push({ type: "scatter", x: r.train[f], y: r.evalOut[f], color: d.colors[f] });
    sc.push({ type: "line", x: [lo, hi], y: [lo, hi], color: "#808080", dash: "2 3" });
    panels.push({ title: "max |eval − train| = " + r.gap.toFixed(3), xlabel: w.train_output,
      ylabel: w.eval_output, series: sc });
    var title = fill2(w.title, { momentum: momentum === null ? w.cumulative : "momentum=" + momentum,
      batch_size: v.batch_size });
    ex.show(info, function (box) { drawChart(box, { title: title, panels: panels }); },
      { running_mean: r.rm, running_var: r.rv, max_gap: r.gap, steps: v.steps });
  }

  function dequantize(qd) {
    var bin = atob(qd.q), out = new Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = qd.lo + (bin.charCodeAt(i) / 255) * (qd.hi - qd.lo);
    return out;
  }

  function renderBatchSize(ex) {
    var d = ex.payload.data, v = ex.values(), w = ex.text;
    var sim = d.sims[v.channels + "|" + v.trials + "|" + v.seed];
    if (!sim) return ex.outside(w.outside);
    if (d.errors["C" + v.channels + "|G" + v.groups]) return ex.failHtml(d.errors["C" + v.channels + "|G" + v.groups]);
    var gn = sim.groups[String(v.groups)], i = d.sizes.indexOf(v.batch_size);
    var spreads = sim.spread[String(v.batch_size)];
    var gnSpread = "0.000";  // GroupNorm's output for sample 0 is the same in every batch
    if (gn.spread) gnSpread = gn.spread[i];
    var info = fill2(w.info, { batch_size: v.batch_size, trials: v.trials, BatchNorm2d: spreads.BatchNorm2d,
      LayerNorm: spreads.LayerNorm, GroupNorm: gnSpread, BatchNorm2d_label: sim.labels.BatchNorm2d,
      LayerNorm_label: sim.labels.LayerNorm, GroupNorm_label: gn.label });
    var keys = ["BatchNorm2d", "LayerNorm", "GroupNorm"], labels = [sim.labels.BatchNorm2d, sim.labels.LayerNorm, gn.label];
    var curve = keys.map(function (k, j) {
      return { type: "line", x: d.sizes, y: k !== "GroupNorm" ? sim.curve[k] : d.sizes.map(function (z, n) { return gn.spread ? +gn.spread[n] : 0; }),
        color: d.colors[k], label: labels[j], marker: true, dash: k === "GroupNorm" ? "5 3" : null };
    });
    var bn = dequantize(sim.bn[i]), ln = dequantize(sim.ln[i]), strips = [];
    var seed = 12345;
    function jitter() { seed = (seed * 1103515245 + 12345) % 2147483648; return (seed / 2147483648 - 0.5) * 0.36; }
    [bn, ln, bn.map(function () { return gn.value; })].forEach(function (vals, j) {
      strips.push({ type: "scatter", x: vals.map(function () { return j + jitter(); }), y: vals, color: d.colors[keys[j]], r: 1.8 });
    });
    var panels = [
      { title: w.moves, xlabel: w.batch_size, ylabel: w.std, xscale: "log2", xticks: d.sizes, series: curve },
      { title: fill2(w.batches, { batch_size: v.batch_size, trials: v.trials }), ylabel: w.output,
        xlim: [-0.6, 2.6], xticks: [0, 1, 2], xticklabels: ["BatchNorm", "LayerNorm", "GroupNorm"], series: strips }
    ];
    ex.show(info, function (box) {
      drawChart(box, { title: w.title, panels: panels });
    }, { spreads: [spreads.BatchNorm2d, spreads.LayerNorm, gnSpread] });
  }

  // Any explorer: every state precomputed by norms (norms.explore.web.states_payload).
  function renderStates(ex) {
    var d = ex.payload.data, idx = d.order.map(function (name) { return ex.index(name); }), st = d.states[idx.join("|")];
    if (!st) return ex.outside(ex.text.outside);
    if (st.error) return ex.failHtml(st.error);
    ex.show(pick(st.info, ex.lang), function (box) {
      el("img", { src: "data:image/png;base64," + st.png, alt: ex.text.figure, class: "ne-png" }, box);
    }, { key: idx.join("|") });
  }

  /* ------------------------------------------------------------------ *
   * The explorer: controls, numbers, error line, figure                 *
   * ------------------------------------------------------------------ */

  function Explorer(root, payload) {
    this.root = root;
    this.payload = payload;
    this.lang = languageOf(root);
    this.text = {};
    for (var key in payload.text || {}) this.text[key] = pick(payload.text[key], this.lang);
    var messages = (payload.data || {}).messages;  // error templates: one language from here on
    for (var m in messages || {}) messages[m] = pick(messages[m], this.lang);
    this.controls = {};
    var self = this, bar = el("div", { class: "ne-controls" }, root);
    this.payload.controls.forEach(function (c) { self.controls[c.name] = self.makeControl(bar, c); });
    this.infoEl = el("div", { class: "ne-info", "aria-live": "polite" }, root);
    this.errorEl = el("div", { class: "ne-error" }, root);
    this.figEl = el("div", { class: "ne-figure" }, root);
    if (this.payload.note) el("div", { class: "ne-note" }, root).innerHTML = pick(this.payload.note, this.lang);
    this.render();
  }

  Explorer.prototype.makeControl = function (bar, c) {
    var self = this, wrap = el("label", { class: "ne-control" }, bar), input, out;
    el("span", { class: "ne-name" }, wrap, pick(c.label, self.lang));
    if (c.type === "select") {
      input = el("select", { name: c.name }, wrap);
      c.options.forEach(function (o, i) { el("option", { value: i }, input, c.labels ? pick(c.labels[i], self.lang) : String(o)); });
      input.value = String(c.options.indexOf(c.value));
    } else if (c.type === "slider") {  // a range over the grid's values
      input = el("input", { type: "range", name: c.name, min: 0, max: c.options.length - 1, step: 1 }, wrap);
      input.value = String(Math.max(0, c.options.indexOf(c.value)));
      out = el("output", {}, wrap, String(c.value));
    } else if (c.type === "int") {  // an integer range, min..max
      input = el("input", { type: "range", name: c.name, min: c.min, max: c.max, step: 1 }, wrap);
      input.value = String(c.value);
      out = el("output", {}, wrap, String(c.value));
    } else if (c.type === "checkbox") {
      input = el("input", { type: "checkbox", name: c.name }, wrap);
      input.checked = !!c.value;
      wrap.insertBefore(input, wrap.firstChild);
    } else {
      input = el("input", { type: "text", name: c.name, size: 12 }, wrap);
      input.value = c.value;
    }
    var ctl = { spec: c, input: input, out: out };
    input.addEventListener(c.type === "text" ? "change" : "input", function () {
      if (out) out.textContent = String(self.value(c.name));
      self.render();
    });
    return ctl;
  };
  Explorer.prototype.index = function (name) {
    var c = this.controls[name];
    return c.spec.type === "checkbox" ? (c.input.checked ? 1 : 0) : +c.input.value;
  };
  Explorer.prototype.value = function (name) {
    var c = this.controls[name], s = c.spec;
    if (s.type === "select" || s.type === "slider") return s.options[+c.input.value];
    if (s.type === "checkbox") return c.input.checked;
    if (s.type === "int") return +c.input.value;
    return c.input.value;
  };
  Explorer.prototype.values = function () {
    var v = {};
    for (var name in this.controls) v[name] = this.value(name);
    return v;
  };
  Explorer.prototype.setDisabled = function (name, off) { if (this.controls[name]) this.controls[name].input.disabled = off; };
  Explorer.prototype.isDisabled = function (name) { return this.controls[name].input.disabled; };
  Explorer.prototype.setRange = function (name, lo, hi) {
    var c = this.controls[name];
    c.input.min = lo; c.input.max = Math.max(lo, hi);
    if (+c.input.value > hi) c.input.value = String(Math.max(lo, hi));
    if (c.out) c.out.textContent = c.input.value;
  };
  Explorer.prototype.clear = function () {
    this.figEl.textContent = ""; this.infoEl.innerHTML = ""; this.errorEl.innerHTML = "";
  };
  Explorer.prototype.show = function (infoHtml, draw, state) {
    this.clear();
    this.infoEl.innerHTML = infoHtml;
    draw(this.figEl);
    this.root.dataset.state = JSON.stringify(state);
  };
  Explorer.prototype.failHtml = function (html) {
    this.clear();
    this.errorEl.innerHTML = pick(html, this.lang);  // a stored error: both languages
    this.root.dataset.state = JSON.stringify({ error: true });
  };
  Explorer.prototype.fail = function (type, message) {
    this.failHtml('<span style="color:' + this.payload.error_color + '"><b>⚠ ' + escapeHtml(type) + ":</b> " +
      escapeHtml(message) + "</span>");
  };
  Explorer.prototype.outside = function (why) {
    this.clear();
    var sep = CJK.test(why.charAt(why.length - 1)) ? "" : " ";  // no space after a full-width stop
    this.errorEl.innerHTML = '<span class="ne-outside">' + escapeHtml(why) + sep + pick(this.payload.colab, this.lang) +
      "</span>";
    this.root.dataset.state = JSON.stringify({ outside: true });
  };
  Explorer.prototype.render = function () {
    ({ reduction: renderReduction, running_stats: renderRunningStats, batch_size: renderBatchSize,
      states: renderStates })[this.payload.kind](this);
  };

  // The module the kernel version builds (norms.explore.state.build_module), as a title.
  function moduleTitle(norm, shape, groups, lastDims) {
    var r = shape.length;
    if (norm === "GroupNorm") return "GroupNorm(" + groups + ", " + shape[1] + ")";
    if (norm === "LayerNorm" || norm === "RMSNorm") {
      var ns = shape.slice(r - lastDims);
      return norm + (ns.length === 1 ? "(" + ns[0] + ")" : "([" + ns.join(", ") + "])");
    }
    var unbatched = /^InstanceNorm\dd$/.test(norm) && r === +norm.charAt(12) + 1;
    return norm + "(" + shape[r < 2 || unbatched ? 0 : 1] + ")";
  }

  window.NormsExplorer = {
    // The payload is inline, or (a large one, moved out of the page by the site's build:
    // tools/sphinx_local/page_weight.py) a file named by data-src, fetched once the explorer
    // comes near the screen.
    mount: function (root) {
      if (root.dataset.mounted) return;
      root.dataset.mounted = "1";
      var data = root.querySelector("script[type='application/json']");
      var src = data.getAttribute("data-src");
      if (!src) { root.explorer = new Explorer(root, JSON.parse(data.textContent)); return; }
      var lang = languageOf(root), words = JSON.parse(root.getAttribute("data-status") || "{}");
      var say = function (key, fallback) { return words[key] ? pick(words[key], lang) : fallback; };
      var status = el("div", { class: "ne-info" }, root, say("loading", "Loading the explorer\u2026"));
      var load = function () {
        fetch(src).then(function (r) {
          if (!r.ok) throw new Error(r.status + " " + r.statusText);
          return r.json();
        }).then(function (payload) {
          root.removeChild(status);
          root.explorer = new Explorer(root, payload);
        }, function (err) {
          status.textContent = fill2(say("failed", "The explorer could not load its data ({error})."), { error: err.message });
        });
      };
      if (!("IntersectionObserver" in window)) { load(); return; }
      var seen = new IntersectionObserver(function (entries) {
        if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); load(); }
      }, { rootMargin: "600px 0px" });
      seen.observe(root);
    },
    mountAll: function () {
      document.querySelectorAll(".norms-explorer").forEach(function (root) { window.NormsExplorer.mount(root); });
    },
    // for tests (node): the partition without a page
    _parseShape: parseShape, _rule: reductionRule, _index: statisticIndex, _statHtml: statHtml, _fold: foldView, _title: moduleTitle,
    _runningStats: runningStats, _wrapTitle: wrapTitle
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", window.NormsExplorer.mountAll);
  else window.NormsExplorer.mountAll();
})();
