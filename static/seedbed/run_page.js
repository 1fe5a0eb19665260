// Run page charts. The important charts (reward, accuracy, entropy, length, KL, clip fractions) load with the
// page: the first answer of the run's JSON endpoint holds their metrics in at most ~1,500 buckets (last step,
// mean, min, max: a spike always shows in its bucket's max), read from the metric tier. Every other metric the run
// logs has a chart under "Other metrics" that fetches its series only once it is scrolled into view (or its
// section opened), then joins the live polling. Each later poll brings the points after the last step the page
// has, for the charts that are loaded, appended as they are. A long series is drawn as its mean line inside a
// min-max band. Zooming a chart (drag, or the range tools) asks the server for that chart's metrics over the
// visible steps: every stored point when they fit, finer buckets otherwise; a double-click goes back to the whole
// run. Charts redraw with Plotly.react on new arrays (Plotly compares data by reference) and a fixed uirevision
// (zoom and pan survive updates). Polling stops once the run has ended. The status, facts and samples are
// server-rendered fragments that htmx polls (templates/runs/_run_state.html).
"use strict";

function startRunPage({liveUrl, seriesUrl, runId, intervalMs, first = null}) {
  const series = {};          // metric key -> {x: [], y: [], lo: [], hi: [], bucketed: bool}
  const zoomed = new Map();   // chart div -> {range: [a, b], series: {key -> same shape}} while zoomed in
  let since = 0;              // last step received
  let ended = false;
  const charts = Array.from(document.querySelectorAll(".chart"));
  const keysOf = (div) => div.dataset.keys.split(",");
  const loaded = new Set(charts.filter(div => !div.dataset.lazy));  // charts whose metrics are fetched and polled
  const polled = () => Array.from(new Set(Array.from(loaded).flatMap(keysOf)));
  let asked = new Set();      // the charts whose metrics the poll in flight asked for
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
  let smoothing = bindSmoothing((setting) => {  // static/seedbed/smoothing.js: one remembered setting
    smoothing = setting;
    for (const div of loaded) { if (onScreen.has(div) || !div.data) draw(div); else stale.add(div); }
  });
  const MARKERS_UP_TO = 200;  // markers on short series only: thousands of SVG markers cost seconds to draw

  function layoutFor(keys) {
    return {
      title: {text: plotText(keys.join(" · ")), font: {size: 14}},
      uirevision: "run-" + runId + "-" + keys.join(","),
      margin: {l: 50, r: 10, t: 36, b: keys.length > 1 ? 64 : 40},
      xaxis: {title: {text: "step"}},
      showlegend: keys.length > 1,
      legend: {orientation: "h", y: -0.38},
      height: 260,
    };
  }

  function tracesFor(keys, source) {
    const traces = [];
    keys.forEach((k, i) => {
      const s = source[k] || {x: [], y: [], lo: [], hi: [], n: [], bucketed: false};
      const color = colors[i % colors.length];
      const name = plotText(k);  // a metric key, as the run logged it: drawn as text
      if (s.bucketed) {  // the band first (under the line): min, then max filled down to it
        traces.push({x: s.x.slice(), y: s.lo.slice(), mode: "lines", line: {width: 0, color}, hoverinfo: "skip",
                     showlegend: false, name: name + " min", meta: "band"});
        traces.push({x: s.x.slice(), y: s.hi.slice(), mode: "lines", line: {width: 0, color}, fill: "tonexty",
                     opacity: 0.25, hoverinfo: "skip", showlegend: false, name: name + " max", meta: "band"});
      }
      const smooth = smoothing.kind !== "none" && s.x.length > 1;
      // smoothed: the raw values stay as a faint line under the smoothed one (a gap stays a gap)
      traces.push({name: smooth ? name + " (raw)" : name, x: s.x.slice(), y: s.y.slice(), meta: "line",
                   line: {color, width: smooth ? 1 : 2}, opacity: smooth ? 0.35 : 1, showlegend: !smooth,
                   mode: s.x.length <= MARKERS_UP_TO ? "lines+markers" : "lines", marker: {size: smooth ? 3 : 4}});
      if (smooth) traces.push({name, x: s.x.slice(), y: smoothGaps(s.y), meta: "smoothed", line: {color, width: 2},
                               mode: "lines"});
    });
    return traces;
  }

  // smoothing over the logged values, a missing (null) point left out of the smoothing and left a gap
  function smoothGaps(ys) {
    const idx = [], vals = [];
    ys.forEach((y, i) => { if (y !== null) { idx.push(i); vals.push(y); } });
    const sm = smoothValues(vals, smoothing.kind, smoothing.param), out = ys.map(() => null);
    idx.forEach((i, j) => { out[i] = sm[j]; });
    return out;
  }

  function draw(div) {
    const keys = keysOf(div);
    const zoom = zoomed.get(div);
    const traces = tracesFor(keys, zoom ? zoom.series : series);
    const points = Math.max(0, ...traces.filter(t => t.meta === "line").map(t => t.x.length));
    div.dataset.points = String(points);
    const layout = layoutFor(keys);
    if (zoom) layout.xaxis.range = zoom.range;
    if (points === 0) {
      layout.annotations = [{text: ended ? "not logged by this run" : "no data yet", showarrow: false,
                             xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
    }
    Plotly.react(div, traces, layout, {displaylogo: false, responsive: true});
    if (!div.dataset.zoomable) {
      div.dataset.zoomable = "true";
      div.on("plotly_relayout", (ev) => onRelayout(div, ev));
    }
  }

  // Points after the last one held (a lazy chart's first fetch may overlap a poll). Once a series is bucketed
  // (width w > 1: bucket b holds the steps (b*w, (b+1)*w], as on the server), a live point joins the bucket of
  // its step, mean weighted by the bucket's count, min and max widened, or opens the next bucket: a page left open
  // keeps the chart at its resolution instead of growing by a point a step.
  function append(dst, s) {
    const last = dst.x.length ? dst.x[dst.x.length - 1] : -Infinity;
    if (!dst.width) dst.width = s.width;
    for (let i = 0; i < s.x.length; i++) {
      const x = s.x[i], n = s.n ? s.n[i] : 1;
      if (x <= last) continue;
      const end = dst.x.length - 1;
      const sameBucket = dst.width > 1 && s.width === 1 && end >= 0 &&
        Math.floor((x - 1) / dst.width) === Math.floor((dst.x[end] - 1) / dst.width);
      if (sameBucket && s.y[i] !== null && n > 0) {
        const m = dst.n[end] || 0;
        dst.y[end] = m && dst.y[end] !== null ? (dst.y[end] * m + s.y[i]) / (m + 1) : s.y[i];
        dst.lo[end] = dst.lo[end] === null ? s.lo[i] : Math.min(dst.lo[end], s.lo[i]);
        dst.hi[end] = dst.hi[end] === null ? s.hi[i] : Math.max(dst.hi[end], s.hi[i]);
        dst.n[end] = m + 1;
        dst.x[end] = x;
      } else if (!sameBucket) {
        dst.x.push(x); dst.y.push(s.y[i]); dst.lo.push(s.lo[i]); dst.hi.push(s.hi[i]); dst.n.push(n);
      }
    }
    dst.bucketed = dst.bucketed || dst.width > 1;
  }

  async function fetchSeries(keys, from, to) {
    const query = "?keys=" + encodeURIComponent(keys.join(",")) + "&from=" + from + "&to=" + to;
    const resp = await fetch(seriesUrl + query, {headers: {"Accept": "application/json"}});
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    return (await resp.json()).series;
  }

  function lastStep(keys) {
    return Math.max(0, ...keys.map(k => (series[k] && series[k].x.length) ? series[k].x[series[k].x.length - 1] : 0));
  }

  async function fetchInto(div, from) {
    const got = await fetchSeries(keysOf(div), from, 2147483647);
    for (const [key, s] of Object.entries(got)) {
      append(series[key] || (series[key] = {x: [], y: [], lo: [], hi: [], n: [], bucketed: false}), s);
    }
    if (!zoomed.has(div)) draw(div);
  }

  // A lazy chart: its whole series (bucketed like the first answer) once it is seen, then it is polled with the
  // others; a poll sent before it was loaded did not ask for its metrics, so its answer is followed by a catch-up.
  async function load(div) {
    if (loaded.has(div) || div.dataset.loading) return;
    div.dataset.loading = "true";
    try {
      await fetchInto(div, 1);
      loaded.add(div);
      div.dataset.lazyLoaded = "true";
    } catch (e) { /* the server is busy: the next time it is seen, it tries again */ }
    delete div.dataset.loading;
  }

  const onScreen = new Set(), stale = new Set();  // charts in view; charts whose redraw waits until they are
  const watch = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) { onScreen.delete(entry.target); continue; }
      onScreen.add(entry.target);
      if (stale.delete(entry.target)) draw(entry.target);
    }
  });
  charts.forEach(div => watch.observe(div));

  const lazy = charts.filter(div => div.dataset.lazy);
  if (lazy.length) {
    const seen = new IntersectionObserver((entries) => {
      for (const entry of entries) if (entry.isIntersecting) load(entry.target);
    }, {rootMargin: "200px"});
    lazy.forEach(div => seen.observe(div));
  }

  async function onRelayout(div, ev) {
    if (ev["xaxis.autorange"]) {  // double-click: back to the whole run
      zoomed.delete(div);
      draw(div);
      return;
    }
    // a drag says xaxis.range[0] and [1]; Plotly.relayout with a whole range says xaxis.range
    const whole = ev["xaxis.range"];
    const a = whole ? whole[0] : ev["xaxis.range[0]"], b = whole ? whole[1] : ev["xaxis.range[1]"];
    if (a === undefined || b === undefined) return;
    const range = [a, b];
    try {
      const got = await fetchSeries(keysOf(div), Math.floor(a), Math.ceil(b));
      const view = {};
      for (const [key, s] of Object.entries(got)) {
        view[key] = {x: [], y: [], lo: [], hi: [], n: [], bucketed: false};
        append(view[key], s);
      }
      zoomed.set(div, {range, series: view});
      div.dataset.zoomedFrom = String(Math.floor(a));
      draw(div);
    } catch (e) { /* the server is busy: the chart keeps what it shows */ }
  }

  pollJson(liveUrl, {
    intervalMs,
    first,  // the page's inline script asked for the important charts' metrics (the keys polled() gives first)
    query: () => { asked = new Set(loaded); return "?since=" + since + "&keys=" + encodeURIComponent(polled().join(",")); },
    onData(state) {
      const changed = new Set();
      for (const [key, s] of Object.entries(state.series)) {
        append(series[key] || (series[key] = {x: [], y: [], lo: [], hi: [], n: [], bucketed: false}), s);
        if (s.x.length) { since = Math.max(since, s.x[s.x.length - 1]); changed.add(key); }
      }
      document.body.dataset.latestStep = String(since);  // the Kill question's step (static/seedbed/confirm.js)
      for (const div of loaded) {
        if (!asked.has(div)) fetchInto(div, lastStep(keysOf(div)) + 1).catch(() => {});
      }
      const first = !charts[0].data, endsNow = state.ended && !ended;
      ended = state.ended;
      // Redraw only the charts whose metrics moved (each redraw of a 1,500-point chart costs milliseconds, and a
      // poll comes every half second), and only those on screen: one scrolled away is redrawn when it comes back.
      for (const div of loaded) {
        if (zoomed.has(div) || !(first || endsNow || keysOf(div).some(k => changed.has(k)))) continue;
        if (onScreen.has(div) || first) draw(div); else stale.add(div);
      }
      if (ended) document.body.dataset.runEnded = "true";  // the last answer after the end carried every point
      return !ended;
    },
  });
}
