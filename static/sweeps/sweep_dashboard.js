// Sweep dashboard live island (plain JS, no build step).
// Polls the sweep's JSON endpoint with, per run, the first step of its last bucket (?since=run:step,...), so a
// run's last, possibly partial, bucket is re-sent and replaced; draws every seed's curve, the mean across
// seeds with a band (per grid cell when the sweep has a grid: each cell in its own colour, e.g. engine=seedbed
// beside engine=trl), and a marker where a killed run ended, with Plotly.react and a fixed uirevision (zoom
// survives updates); refreshes the runs table, policy decisions, next decision points and alerts.
// With the forecast toggle on (checked by default for a bayes sweep) it also polls the sweep's forecasts
// (forecastUrl, every few seconds: webapp/sweeps/forecasts.py) and draws each run's calibrated forecast to its
// horizon dashed after its curve, in the curve's colour, over a light 95 % band ending on the interval of its row
// (step axis only: the forecast is in steps).
"use strict";

// Two-sided 95 % Student t quantiles t(0.975, df) for df = 1..30; beyond, the normal 1.96.
const T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
              2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
              2.045, 2.042];
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
                 "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2", "#9edae5"];

// Mean and band of the values at one bucket across seeds: min–max, mean ± sample std, or a 95 % t interval.
function bandOf(values, kind) {
  const n = values.length;
  const mean = values.reduce((a, b) => a + b, 0) / n;
  if (kind === "minmax") return {mean, lo: Math.min(...values), hi: Math.max(...values)};
  if (n < 2) return {mean, lo: mean, hi: mean};
  const sd = Math.sqrt(values.reduce((a, v) => a + (v - mean) * (v - mean), 0) / (n - 1));
  const half = kind === "std" ? sd : (n - 1 <= 30 ? T975[n - 2] : 1.96) * sd / Math.sqrt(n);
  return {mean, lo: mean - half, hi: mean + half};
}

const BUCKET_FIELDS = ["b", "first", "last", "lo", "hi", "avg", "t"];

function sweepEl(id) { return document.getElementById(id); }

// The dashboard's state, shared by the functions below. The chart only: the runs table, decisions, alerts, state
// and samples are server-rendered fragments that htmx polls (templates/sweeps/_panel.html).
function sweepDashboardState({liveUrl, forecastUrl, sweepId, intervalMs, first}) {
  return {
    liveUrl, forecastUrl, sweepId, intervalMs,
    first,                      // the inline script's first answer, used once
    chart: sweepEl("sweep-chart"),
    metric: sweepEl("metric").value,
    width: null,                // bucket width, fixed by the first answer for this metric
    buckets: {},                // run id -> {b, first, last, lo, hi, avg, t}
    runs: [],                   // each run's seed, status and who stopped it (for trace names and markers)
    ended: false,
    poller: null,
    forecast: null,             // the last forecasts answer for this metric ({runs: {id: {path, final, ci, p}}})
    forecastPoller: null,
  };
}

// Per run, the first step of its last bucket (?since=run:step,...): that bucket, possibly partial, is re-sent.
function sweepSinceParam(dash) {
  return Object.entries(dash.buckets).filter(([, s]) => s.b.length)
    .map(([id, s]) => id + ":" + (s.b[s.b.length - 1] * dash.width)).join(",");
}

// Each answer brings the points after what we have, bucketed: drop what it re-sends (the last partial bucket
// onward), then append.
function sweepMerge(dash, series) {
  if (dash.width === null) dash.width = series.width;
  for (const [id, s] of Object.entries(series.runs)) {
    const dst = dash.buckets[id] ||
      (dash.buckets[id] = {b: [], first: [], last: [], lo: [], hi: [], avg: [], t: [], tail: null});
    const from = s.b.length ? s.b[0] : Infinity;
    let keep = dst.b.length;
    while (keep > 0 && dst.b[keep - 1] >= from) keep--;
    for (const k of BUCKET_FIELDS) dst[k].splice(keep, dst[k].length - keep, ...s[k]);
    dst.tail = s.tail;
  }
}

function sweepColor(index) { return PALETTE[index % PALETTE.length]; }

// A grid's cells ("engine=trl", "lr=0.0001 eps_high=0.28"), in the order of their first run: with more than
// one, a run is coloured by its cell and named after it, and each cell gets its own mean and band.
function sweepCellOf(run) { return plotText(Object.entries(run.knobs || {}).map(([k, v]) => k + "=" + v).join(" ")); }

function sweepCellsOf(runs) {
  const cells = new Map();   // label -> colour index
  for (const run of runs) if (!cells.has(sweepCellOf(run))) cells.set(sweepCellOf(run), cells.size);
  return cells;
}

function sweepRgba(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
}

// The chart's controls: smoothing and its parameter, the band's kind, the x axis (step or time).
function sweepControls() {
  return {smoothing: sweepEl("smoothing").value, band: sweepEl("band").value, xKind: sweepEl("xaxis").value,
          param: parseFloat(sweepEl("smooth-param").value) || 0};
}

// The drawn points of one run: raw min/max per bucket (spikes stay visible), or its smoothed bucket means.
function sweepRunCurve(s, width, {smoothing, param, xKind}) {
  const xs = xKind === "time" ? s.t : s.last;
  if (smoothing === "none") {
    if (width === 1) return {x: xs.slice(), y: s.avg.slice()};
    const x = [], y = [];
    for (let i = 0; i < s.b.length; i++) {
      if (s.first[i] === s.last[i]) { x.push(xs[i]); y.push(s.avg[i]); continue; }
      x.push(xKind === "time" ? xs[i] : s.first[i], xs[i]);
      y.push(s.lo[i], s.hi[i]);
    }
    return {x, y};
  }
  return {x: xs.slice(), y: smoothValues(s.avg, smoothing, param)};
}

// Each run's curve (and forecast), its smoothed bucket means gathered per cell and bucket for the mean and band,
// and a stop marker where a killed run ended.
function sweepRunTraces(dash, controls, cells) {
  const {smoothing, param, xKind} = controls, grouped = cells.size > 1;
  const out = {traces: [], perCell: new Map(), stops: {x: [], y: [], text: []}, points: 0};
  dash.runs.forEach((run, index) => {
    const s = dash.buckets[run.id];
    if (!s || !s.b.length) return;
    out.points += s.b.length;
    const curve = sweepRunCurve(s, dash.width, controls);
    const killed = run.status === "killed", cell = sweepCellOf(run);
    const name = (grouped ? cell + " · " : "") + "seed " + run.seed;
    const color = sweepColor(grouped ? cells.get(cell) : index);
    out.traces.push({type: "scatter", mode: "lines", name, x: curve.x, y: curve.y,
                     legendgroup: grouped ? cell : undefined,
                     line: {color, width: 1.3, dash: killed ? "dot" : "solid"},
                     hovertemplate: name + " (run " + run.id + ")<br>%{x}: %{y:.4g}<extra></extra>"});
    sweepForecastTraces(dash, out.traces, run, name, color, xKind);
    const means = smoothing === "none" ? s.avg : smoothValues(s.avg, smoothing, param);
    const xs = xKind === "time" ? s.t : s.last;
    const perBucket = out.perCell.get(cell) || out.perCell.set(cell, new Map()).get(cell);
    s.b.forEach((b, i) => {
      const slot = perBucket.get(b) || perBucket.set(b, {xs: [], ys: []}).get(b);
      slot.xs.push(xs[i]); slot.ys.push(means[i]);
    });
    if (!killed) return;
    out.stops.x.push(curve.x[curve.x.length - 1]);
    out.stops.y.push(curve.y[curve.y.length - 1]);
    out.stops.text.push(name + " stopped at step " + run.last_step + " by " + plotText(run.killed_by) +
                        (run.kill_reason ? ":<br>" + plotText(run.kill_reason) : ""));
  });
  return out;
}

// The mean across seeds and its band: one for the whole sweep, or one per grid cell in the cell's colour, drawn
// only where at least two seeds have a point (beyond, one seed alone is no mean: it is its own curve), each point
// with how many seeds it covers (customdata, in its hover).
function sweepMeanTraces(perCell, cells, band) {
  const traces = [], grouped = cells.size > 1;
  for (const [cell, perBucket] of perCell) {
    const order = Array.from(perBucket.keys()).filter(b => perBucket.get(b).ys.length >= 2).sort((a, b) => a - b);
    if (!order.length) continue;
    const mx = [], my = [], lo = [], hi = [], covered = [];
    for (const b of order) {
      const {xs, ys} = perBucket.get(b);
      const stat = bandOf(ys, band === "none" ? "minmax" : band);
      mx.push(xs.reduce((a, v) => a + v, 0) / xs.length); my.push(stat.mean); lo.push(stat.lo); hi.push(stat.hi);
      covered.push([ys.length]);
    }
    const color = grouped ? sweepColor(cells.get(cell)) : "#111";
    const suffix = grouped ? " " + cell : "", legendgroup = grouped ? cell : undefined;
    if (band !== "none") {
      traces.push({type: "scatter", mode: "lines", name: "band low" + suffix, x: mx, y: lo, line: {width: 0},
                   legendgroup, showlegend: false, hoverinfo: "skip"});
      traces.push({type: "scatter", mode: "lines", name: "band (" + band + ")" + suffix, x: mx, y: hi,
                   line: {width: 0}, legendgroup, fill: "tonexty",
                   fillcolor: grouped ? sweepRgba(color, 0.15) : "rgba(40,40,40,0.15)", hoverinfo: "skip"});
    }
    traces.push({type: "scatter", mode: "lines", name: "mean" + suffix, x: mx, y: my, customdata: covered,
                 legendgroup, line: {color, width: 3},
                 hovertemplate: "mean" + suffix + " %{x}: %{y:.4g} (of %{customdata[0]} seeds)<extra></extra>"});
  }
  return traces;
}

function sweepLayout(dash, xKind, points) {
  const layout = {
    uirevision: "sweep-" + dash.sweepId + "-" + dash.metric + "-" + xKind,
    margin: {l: 55, r: 10, t: 30, b: 45}, height: 460,
    title: {text: plotText(dash.metric), font: {size: 14}},
    xaxis: {title: {text: xKind === "time" ? "seconds since the run started" : "step"}},
    legend: {orientation: "v"},
  };
  delete dash.chart.dataset.unknownMetric;
  if (!points) {
    layout.annotations = [{text: sweepNoPointsText(dash.chart, dash.metric), showarrow: false,
                           xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
  }
  return layout;
}

function sweepDraw(dash) {
  const controls = sweepControls(), cells = sweepCellsOf(dash.runs);
  const {traces, perCell, stops, points} = sweepRunTraces(dash, controls, cells);
  traces.push(...sweepMeanTraces(perCell, cells, controls.band));
  traces.push({type: "scatter", mode: "markers", name: "stopped", x: stops.x, y: stops.y, text: stops.text,
               marker: {symbol: "x", size: 12, color: "#b3261e", line: {width: 2}},
               hovertemplate: "%{text}<extra></extra>"});
  const chart = dash.chart;
  chart.dataset.forecasts = String(traces.filter(t => t.meta === "forecast").length);
  chart.dataset.points = String(points);
  chart.dataset.stopped = String(stops.x.length);
  Plotly.react(chart, traces, sweepLayout(dash, controls.xKind, points), {displaylogo: false, responsive: true});
  sweepEl("bucket-note").textContent =
    (dash.width > 1 ? "each point: a bucket of " + dash.width + " steps (raw: its min and max)" : "") +
    (dash.forecast && controls.xKind === "time" && sweepEl("forecast-toggle").checked
      ? " forecasts: on the step axis only" : "");
}

// Why a chart is empty: a key the sweep's runs do not log (a typo) is "no such metric", naming the ones they
// do; otherwise nothing is logged yet. Keys logged now and then (eval/, system/) may be missing at step 1.
function sweepNoPointsText(chart, key) {
  const logged = JSON.parse(chart.dataset.logged || "[]");
  const periodic = key.startsWith("eval/") || key.startsWith("system/");
  if (!logged.length || logged.includes(key) || periodic) return "no data yet";
  chart.dataset.unknownMetric = key;
  return "no such metric: " + plotText(key) + " (logged: " + logged.slice(0, 8).map(plotText).join(", ") +
    (logged.length > 8 ? ", …" : "") + ")";
}

// A run's calibrated forecast from its last point to its horizon: the band (low edge, then the high edge filled to
// it) and the dashed median, in the run's colour, hidden from the legend (hover says whose it is). The path ends on
// the forecast worth and the band on the 95 % interval the runs table shows (webapp/sweeps/policies/forecast_paths.py);
// a run out of the race has no path.
function sweepForecastTraces(dash, traces, run, name, color, xKind) {
  const toggle = sweepEl("forecast-toggle");
  const f = dash.forecast && xKind === "step" && toggle && toggle.checked ? dash.forecast.runs[run.id] : null;
  if (!f || !f.path.x.length) return;
  const last = dash.buckets[run.id].last;
  const p = sweepClipPath(f.path, last[last.length - 1]);
  if (p.x.length < 2) return;
  const group = "forecast-" + run.id;
  traces.push({type: "scatter", mode: "lines", name: "forecast low " + name, x: p.x, y: p.lo,
               line: {width: 0, color}, legendgroup: group, showlegend: false, hoverinfo: "skip"});
  traces.push({type: "scatter", mode: "lines", name: "forecast band " + name, x: p.x, y: p.hi,
               line: {width: 0, color}, fill: "tonexty", fillcolor: sweepRgba(color, 0.12), legendgroup: group,
               showlegend: false, hoverinfo: "skip"});
  const final = "<br>forecast worth " + f.final.toPrecision(4) + " (95 % " + f.ci[0].toPrecision(4) + " to " +
    f.ci[1].toPrecision(4) + ")" + (f.p === null ? "" : ", P(near-best) " + f.p.toFixed(2)) +
    (f.at_stop === null ? "" : " at its stop (step " + f.at_stop + ")");
  traces.push({type: "scatter", mode: "lines", name: "forecast " + name, meta: "forecast", x: p.x, y: p.y,
               customdata: p.lo.map((lo, i) => [lo, p.hi[i]]), legendgroup: group, showlegend: false,
               line: {color, width: 1.3, dash: "dash"},
               hovertemplate: "forecast " + name + " step %{x:.0f}: %{y:.4g} (95 % %{customdata[0]:.4g} to " +
                              "%{customdata[1]:.4g})" + final + "<extra></extra>"});
}

// The path from step ``from`` on: a forecast answer may be a few steps older than the curve (it is polled less
// often and cached while the sweep moves little), so its start, interpolated, joins the curve's last point
// instead of running over it.
function sweepClipPath(path, from) {
  const out = {x: [], y: [], lo: [], hi: []};
  for (let i = 0; i < path.x.length; i++) {
    if (path.x[i] < from) continue;
    if (!out.x.length && i > 0 && path.x[i] > from) {
      const w = (from - path.x[i - 1]) / (path.x[i] - path.x[i - 1]);
      out.x.push(from);
      for (const k of ["y", "lo", "hi"]) out[k].push(path[k][i - 1] + w * (path[k][i] - path[k][i - 1]));
    }
    for (const k of ["x", "y", "lo", "hi"]) out[k].push(path[k][i]);
  }
  return out;
}

// Poll the forecasts of the metric shown while the toggle is on; an answer for another metric is dropped.
function sweepStartForecasts(dash) {
  if (dash.forecastPoller) dash.forecastPoller.stop();
  dash.forecastPoller = null;
  dash.forecast = null;
  const toggle = sweepEl("forecast-toggle");
  if (!dash.forecastUrl || !toggle || !toggle.checked) { sweepDraw(dash); return; }
  const asked = dash.metric;
  dash.forecastPoller = pollJson(dash.forecastUrl, {
    intervalMs: 1500, query: () => "?" + new URLSearchParams({metric: asked}),
    onData(answer) {
      if (asked !== dash.metric) return false;
      dash.forecast = answer;
      sweepDraw(dash);
      return !dash.ended;  // once the sweep has ended, this answer was the last
    }});
}

function sweepQuery(dash) {
  const params = new URLSearchParams({metric: dash.metric});
  if (dash.width !== null) { params.set("width", dash.width); params.set("since", sweepSinceParam(dash)); }
  return "?" + params;
}

// One answer of the live poll for metric ``asked``; returns whether to keep polling.
function sweepOnLiveAnswer(dash, asked, state) {
  if (asked !== dash.metric) return false;  // an answer for a metric no longer shown is dropped
  sweepMerge(dash, state.series);
  dash.runs = state.runs;
  dash.ended = state.ended;
  sweepDraw(dash);
  // Too many buckets for the fixed width (the runs grew long): start again with a wider one.
  const most = Math.max(0, ...Object.values(dash.buckets).map(s => s.b.length));
  if (most > 800) { sweepReset(dash); return false; }
  if (dash.ended) { document.body.dataset.sweepEnded = "true"; return false; }
  return true;
}

function sweepStartPolling(dash) {
  const asked = dash.metric;
  // the page's inline script asked for the first metric's whole curves: used once, for the first start
  const early = dash.first && dash.metric === sweepEl("metric").defaultValue ? dash.first : null;
  dash.first = null;
  dash.poller = pollJson(dash.liveUrl, {intervalMs: dash.intervalMs, query: () => sweepQuery(dash), first: early,
                                        onData: (state) => sweepOnLiveAnswer(dash, asked, state)});
}

function sweepReset(dash) {
  if (dash.poller) dash.poller.stop();
  dash.width = null; dash.buckets = {};
  sweepStartPolling(dash);
  sweepStartForecasts(dash);
}

function startSweepDashboard({liveUrl, forecastUrl = null, sweepId, intervalMs, first = null}) {
  const dash = sweepDashboardState({liveUrl, forecastUrl, sweepId, intervalMs, first});
  const draw = () => sweepDraw(dash);
  sweepEl("metric").addEventListener("change", () => {
    if (!sweepEl("metric").value || sweepEl("metric").value === dash.metric) return;
    dash.metric = sweepEl("metric").value;
    sweepReset(dash);
  });
  for (const id of ["band", "xaxis"]) sweepEl(id).addEventListener("change", draw);
  const toggle = sweepEl("forecast-toggle");
  if (toggle) toggle.addEventListener("change", () => sweepStartForecasts(dash));
  bindSmoothing(draw);  // static/seedbed/smoothing.js: the app's one remembered setting
  window.sweepDashboard = {state: () => ({width: dash.width, buckets: dash.buckets, runs: dash.runs, ended: dash.ended,
                                          metric: dash.metric, forecast: dash.forecast})};
  sweepStartPolling(dash);
  sweepStartForecasts(dash);
}
