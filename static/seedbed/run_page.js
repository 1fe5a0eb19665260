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

const RUN_CHART_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];
const RUN_MARKERS_UP_TO = 200;  // markers on short series only: thousands of SVG markers cost seconds to draw
const RUN_LAST_STEP = 2147483647;  // "to the end" for the series endpoint

// An empty series: metric values by step, each with its bucket's min, max and count once bucketed.
function runEmptySeries() { return {x: [], y: [], lo: [], hi: [], n: [], bucketed: false}; }

// The metric keys a chart draws (its data-keys attribute).
function runChartKeys(div) { return div.dataset.keys.split(","); }

// The page's state, shared by the functions below: every series received, the charts' zoom, the poll's cursor.
function runPageState({seriesUrl, runId}) {
  const charts = Array.from(document.querySelectorAll(".chart"));
  return {
    seriesUrl, runId, charts,
    series: {},                 // metric key -> {x: [], y: [], lo: [], hi: [], n: [], bucketed: bool}
    zoomed: new Map(),          // chart div -> {range: [a, b], series: {key -> same shape}} while zoomed in
    since: 0,                   // last step received
    ended: false,
    loaded: new Set(charts.filter(div => !div.dataset.lazy)),  // charts whose metrics are fetched and polled
    asked: new Set(),           // the charts whose metrics the poll in flight asked for
    onScreen: new Set(),        // charts in view
    stale: new Set(),           // charts whose redraw waits until they are in view
    smoothing: null,            // static/seedbed/smoothing.js: {kind, param}
  };
}

// The metric keys of every loaded chart, each once: what the live poll asks for.
function runPolledKeys(page) {
  return Array.from(new Set(Array.from(page.loaded).flatMap(runChartKeys)));
}

function runChartLayout(runId, keys) {
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

// One metric's traces: a bucketed series' min-max band first (under the line), then its line; smoothed, the raw
// values stay as a faint line under the smoothed one (a gap stays a gap).
function runMetricTraces(s, name, color, smoothing) {
  const traces = [];
  if (s.bucketed) {  // min, then max filled down to it
    traces.push({x: s.x.slice(), y: s.lo.slice(), mode: "lines", line: {width: 0, color}, hoverinfo: "skip",
                 showlegend: false, name: name + " min", meta: "band"});
    traces.push({x: s.x.slice(), y: s.hi.slice(), mode: "lines", line: {width: 0, color}, fill: "tonexty",
                 opacity: 0.25, hoverinfo: "skip", showlegend: false, name: name + " max", meta: "band"});
  }
  const smooth = smoothing.kind !== "none" && s.x.length > 1;
  traces.push({name: smooth ? name + " (raw)" : name, x: s.x.slice(), y: s.y.slice(), meta: "line",
               line: {color, width: smooth ? 1 : 2}, opacity: smooth ? 0.35 : 1, showlegend: !smooth,
               mode: s.x.length <= RUN_MARKERS_UP_TO ? "lines+markers" : "lines", marker: {size: smooth ? 3 : 4}});
  if (smooth) traces.push({name, x: s.x.slice(), y: runSmoothGaps(s.y, smoothing), meta: "smoothed",
                           line: {color, width: 2}, mode: "lines"});
  return traces;
}

function runChartTraces(keys, source, smoothing) {
  return keys.flatMap((k, i) => runMetricTraces(source[k] || runEmptySeries(), plotText(k),  // a key: drawn as text
                                                RUN_CHART_COLORS[i % RUN_CHART_COLORS.length], smoothing));
}

// Smoothing over the logged values, a missing (null) point left out of the smoothing and left a gap.
function runSmoothGaps(ys, smoothing) {
  const idx = [], vals = [];
  ys.forEach((y, i) => { if (y !== null) { idx.push(i); vals.push(y); } });
  const sm = smoothValues(vals, smoothing.kind, smoothing.param), out = ys.map(() => null);
  idx.forEach((i, j) => { out[i] = sm[j]; });
  return out;
}

function runDrawChart(page, div) {
  const keys = runChartKeys(div);
  const zoom = page.zoomed.get(div);
  const traces = runChartTraces(keys, zoom ? zoom.series : page.series, page.smoothing);
  const points = Math.max(0, ...traces.filter(t => t.meta === "line").map(t => t.x.length));
  div.dataset.points = String(points);
  const layout = runChartLayout(page.runId, keys);
  if (zoom) layout.xaxis.range = zoom.range;
  if (points === 0) {
    // data-unlogged: why the run's config never logs this chart's metrics (webapp/runs/selectors.py)
    const note = div.dataset.unlogged ? "not logged for this config (" + div.dataset.unlogged + ")"
      : page.ended ? "not logged by this run" : "no data yet";
    layout.annotations = [{text: plotText(note), showarrow: false,
                           xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
  }
  Plotly.react(div, traces, layout, {displaylogo: false, responsive: true});
  if (!div.dataset.zoomable) {
    div.dataset.zoomable = "true";
    div.on("plotly_relayout", (ev) => runZoomChart(page, div, ev));
  }
}

// Whether step x falls in the last bucket of dst (width w > 1: bucket b holds the steps (b*w, (b+1)*w], as on
// the server) while s brings raw points (width 1).
function runInLastBucket(dst, s, x) {
  const end = dst.x.length - 1;
  return dst.width > 1 && s.width === 1 && end >= 0 &&
    Math.floor((x - 1) / dst.width) === Math.floor((dst.x[end] - 1) / dst.width);
}

// Points after the last one held (a lazy chart's first fetch may overlap a poll). Once a series is bucketed, a
// live point joins the bucket of its step, mean weighted by the bucket's count, min and max widened, or opens the
// next bucket: a page left open keeps the chart at its resolution instead of growing by a point a step.
function runAppendPoints(dst, s) {
  const last = dst.x.length ? dst.x[dst.x.length - 1] : -Infinity;
  if (!dst.width) dst.width = s.width;
  for (let i = 0; i < s.x.length; i++) {
    const x = s.x[i], n = s.n ? s.n[i] : 1;
    if (x <= last) continue;
    const end = dst.x.length - 1, sameBucket = runInLastBucket(dst, s, x);
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

// Append an answer's series ({key: series}) to the held ones, creating those not held yet.
function runMergeSeries(held, got) {
  for (const [key, s] of Object.entries(got)) runAppendPoints(held[key] || (held[key] = runEmptySeries()), s);
}

async function runFetchSeries(seriesUrl, keys, from, to) {
  const query = "?keys=" + encodeURIComponent(keys.join(",")) + "&from=" + from + "&to=" + to;
  const resp = await fetch(seriesUrl + query, {headers: {"Accept": "application/json"}});
  if (!resp.ok) throw new Error("HTTP " + resp.status);
  return (await resp.json()).series;
}

function runLastStep(series, keys) {
  return Math.max(0, ...keys.map(k => (series[k] && series[k].x.length) ? series[k].x[series[k].x.length - 1] : 0));
}

async function runFetchInto(page, div, from) {
  runMergeSeries(page.series, await runFetchSeries(page.seriesUrl, runChartKeys(div), from, RUN_LAST_STEP));
  if (!page.zoomed.has(div)) runDrawChart(page, div);
}

// A lazy chart: its whole series (bucketed like the first answer) once it is seen, then it is polled with the
// others; a poll sent before it was loaded did not ask for its metrics, so its answer is followed by a catch-up.
async function runLoadLazyChart(page, div) {
  if (page.loaded.has(div) || div.dataset.loading) return;
  div.dataset.loading = "true";
  try {
    await runFetchInto(page, div, 1);
    page.loaded.add(div);
    div.dataset.lazyLoaded = "true";
  } catch (e) { /* the server is busy: the next time it is seen, it tries again */ }
  delete div.dataset.loading;
}

// Track which charts are on screen (a stale one is redrawn when it comes into view) and load each lazy chart
// when it comes near the view.
function runWatchCharts(page) {
  const watch = new IntersectionObserver((entries) => {
    for (const entry of entries) {
      if (!entry.isIntersecting) { page.onScreen.delete(entry.target); continue; }
      page.onScreen.add(entry.target);
      if (page.stale.delete(entry.target)) runDrawChart(page, entry.target);
    }
  });
  page.charts.forEach(div => watch.observe(div));
  const lazy = page.charts.filter(div => div.dataset.lazy);
  if (!lazy.length) return;
  const seen = new IntersectionObserver((entries) => {
    for (const entry of entries) if (entry.isIntersecting) runLoadLazyChart(page, entry.target);
  }, {rootMargin: "200px"});
  lazy.forEach(div => seen.observe(div));
}

// A zoom (drag or range tools) fetches the chart's metrics over the visible steps; a double-click (autorange)
// goes back to the whole run.
async function runZoomChart(page, div, ev) {
  if (ev["xaxis.autorange"]) {
    page.zoomed.delete(div);
    runDrawChart(page, div);
    return;
  }
  // a drag says xaxis.range[0] and [1]; Plotly.relayout with a whole range says xaxis.range
  const whole = ev["xaxis.range"];
  const a = whole ? whole[0] : ev["xaxis.range[0]"], b = whole ? whole[1] : ev["xaxis.range[1]"];
  if (a === undefined || b === undefined) return;
  try {
    const view = {};
    runMergeSeries(view, await runFetchSeries(page.seriesUrl, runChartKeys(div), Math.floor(a), Math.ceil(b)));
    page.zoomed.set(div, {range: [a, b], series: view});
    div.dataset.zoomedFrom = String(Math.floor(a));
    runDrawChart(page, div);
  } catch (e) { /* the server is busy: the chart keeps what it shows */ }
}

// The smoothing setting changed: redraw the loaded charts on screen (and any never drawn), the rest when seen.
function runSmoothingChanged(page, setting) {
  page.smoothing = setting;
  for (const div of page.loaded) {
    if (page.onScreen.has(div) || !div.data) runDrawChart(page, div); else page.stale.add(div);
  }
}

// One answer of the live poll; returns whether to keep polling.
function runOnLiveAnswer(page, state) {
  const changed = new Set();
  for (const [key, s] of Object.entries(state.series)) {
    runAppendPoints(page.series[key] || (page.series[key] = runEmptySeries()), s);
    if (s.x.length) { page.since = Math.max(page.since, s.x[s.x.length - 1]); changed.add(key); }
  }
  document.body.dataset.latestStep = String(page.since);  // the Kill question's step (static/seedbed/confirm.js)
  for (const div of page.loaded) {
    if (!page.asked.has(div)) runFetchInto(page, div, runLastStep(page.series, runChartKeys(div)) + 1).catch(() => {});
  }
  const first = !page.charts[0].data, endsNow = state.ended && !page.ended;
  page.ended = state.ended;
  // Redraw only the charts whose metrics moved (each redraw of a 1,500-point chart costs milliseconds, and a
  // poll comes every half second), and only those on screen: one scrolled away is redrawn when it comes back.
  for (const div of page.loaded) {
    if (page.zoomed.has(div) || !(first || endsNow || runChartKeys(div).some(k => changed.has(k)))) continue;
    if (page.onScreen.has(div) || first) runDrawChart(page, div); else page.stale.add(div);
  }
  if (page.ended) document.body.dataset.runEnded = "true";  // the last answer after the end carried every point
  return !page.ended;
}

function startRunPage({liveUrl, seriesUrl, runId, intervalMs, first = null}) {
  const page = runPageState({seriesUrl, runId});
  page.smoothing = bindSmoothing((setting) => runSmoothingChanged(page, setting));
  runWatchCharts(page);
  pollJson(liveUrl, {
    intervalMs,
    first,  // the page's inline script asked for the important charts' metrics (the keys runPolledKeys gives first)
    query: () => {
      page.asked = new Set(page.loaded);
      return "?since=" + page.since + "&keys=" + encodeURIComponent(runPolledKeys(page).join(","));
    },
    onData: (state) => runOnLiveAnswer(page, state),
  });
}
