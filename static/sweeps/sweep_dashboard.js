// Sweep dashboard live island (plain JS, no build step).
// Polls the sweep's JSON endpoint with, per run, the first step of its last bucket (?since=run:step,...), so a
// run's last, possibly partial, bucket is re-sent and replaced; draws every seed's curve, the mean across
// seeds with a band (per grid cell when the sweep has a grid: each cell in its own colour, e.g. engine=seedbed
// beside engine=trl), and a marker where a killed run ended, with Plotly.react and a fixed uirevision (zoom
// survives updates); refreshes the runs table, policy decisions, next decision points and alerts.
// With the forecast toggle on (checked by default for a bayes sweep) it also polls the sweep's forecasts
// (forecastUrl, every few seconds: webapp/sweeps/forecasts.py) and draws each run's forecast to its horizon dashed
// after its curve, in the curve's colour, over a light 95 % band (step axis only: the forecast is in steps).
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

function startSweepDashboard({liveUrl, forecastUrl = null, sweepId, intervalMs, first = null}) {
  // The chart only: the runs table, decisions, alerts, state and samples are server-rendered fragments that
  // htmx polls (templates/sweeps/_panel.html). Each answer brings the points after what we have, bucketed.
  const el = id => document.getElementById(id);
  const chart = el("sweep-chart");
  let metric = el("metric").value;
  let width = null;         // bucket width, fixed by the first answer for this metric
  let buckets = {};         // run id -> {b, first, last, lo, hi, avg, t}
  let runs = [];            // each run's seed, status and who stopped it (for trace names and markers)
  let ended = false;
  let poller = null;
  let forecast = null;      // the last forecasts answer for this metric ({runs: {id: {path, final, ci, p}}})
  let forecastPoller = null;

  function sinceParam() {
    return Object.entries(buckets).filter(([, s]) => s.b.length)
      .map(([id, s]) => id + ":" + (s.b[s.b.length - 1] * width)).join(",");
  }

  function merge(series) {
    if (width === null) width = series.width;
    for (const [id, s] of Object.entries(series.runs)) {
      const dst = buckets[id] || (buckets[id] = {b: [], first: [], last: [], lo: [], hi: [], avg: [], t: [], tail: null});
      // drop what the answer re-sends (the last partial bucket onward), then append
      const from = s.b.length ? s.b[0] : Infinity;
      let keep = dst.b.length;
      while (keep > 0 && dst.b[keep - 1] >= from) keep--;
      for (const k of BUCKET_FIELDS) dst[k].splice(keep, dst[k].length - keep, ...s[k]);
      dst.tail = s.tail;
    }
  }

  function colorOf(index) { return PALETTE[index % PALETTE.length]; }

  // A grid's cells ("engine=trl", "lr=0.0001 eps_high=0.28"), in the order of their first run: with more than
  // one, a run is coloured by its cell and named after it, and each cell gets its own mean and band.
  function cellOf(run) { return plotText(Object.entries(run.knobs || {}).map(([k, v]) => k + "=" + v).join(" ")); }

  function cellsOf(runs) {
    const cells = new Map();   // label -> colour index
    for (const run of runs) if (!cells.has(cellOf(run))) cells.set(cellOf(run), cells.size);
    return cells;
  }

  function rgba(hex, alpha) {
    const n = parseInt(hex.slice(1), 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // The drawn points of one run: raw min/max per bucket (spikes stay visible), or its smoothed bucket means.
  function runCurve(s, smoothing, param, xKind) {
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

  function draw() {
    const smoothing = el("smoothing").value, band = el("band").value, xKind = el("xaxis").value;
    const param = parseFloat(el("smooth-param").value) || 0;
    const traces = [], stopX = [], stopY = [], stopText = [];
    const cells = cellsOf(runs), grouped = cells.size > 1;
    const perCell = new Map();     // cell -> bucket -> {xs: [], ys: []} of smoothed means, for its mean and band
    let points = 0;
    runs.forEach((run, index) => {
      const s = buckets[run.id];
      if (!s || !s.b.length) return;
      points += s.b.length;
      const curve = runCurve(s, smoothing, param, xKind);
      const killed = run.status === "killed";
      const cell = cellOf(run);
      const name = (grouped ? cell + " · " : "") + "seed " + run.seed;
      const color = colorOf(grouped ? cells.get(cell) : index);
      traces.push({type: "scatter", mode: "lines", name, x: curve.x, y: curve.y,
                   legendgroup: grouped ? cell : undefined,
                   line: {color, width: 1.3, dash: killed ? "dot" : "solid"},
                   hovertemplate: name + " (run " + run.id + ")<br>%{x}: %{y:.4g}<extra></extra>"});
      forecastTraces(traces, run, name, color, xKind);
      const means = smoothing === "none" ? s.avg : smoothValues(s.avg, smoothing, param);
      const xs = xKind === "time" ? s.t : s.last;
      const perBucket = perCell.get(cell) || perCell.set(cell, new Map()).get(cell);
      s.b.forEach((b, i) => {
        const slot = perBucket.get(b) || perBucket.set(b, {xs: [], ys: []}).get(b);
        slot.xs.push(xs[i]); slot.ys.push(means[i]);
      });
      if (killed) {
        stopX.push(curve.x[curve.x.length - 1]);
        stopY.push(curve.y[curve.y.length - 1]);
        stopText.push(name + " stopped at step " + run.last_step + " by " + plotText(run.killed_by) +
                      (run.kill_reason ? ":<br>" + plotText(run.kill_reason) : ""));
      }
    });
    // the mean across seeds and its band: one for the whole sweep, or one per grid cell in the cell's colour,
    // drawn only where at least two seeds have a point (beyond, one seed alone is no mean: it is its own curve),
    // each point with how many seeds it covers (customdata, in its hover)
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
      const color = grouped ? colorOf(cells.get(cell)) : "#111";
      const suffix = grouped ? " " + cell : "";
      if (band !== "none") {
        traces.push({type: "scatter", mode: "lines", name: "band low" + suffix, x: mx, y: lo, line: {width: 0},
                     legendgroup: grouped ? cell : undefined, showlegend: false, hoverinfo: "skip"});
        traces.push({type: "scatter", mode: "lines", name: "band (" + band + ")" + suffix, x: mx, y: hi,
                     line: {width: 0}, legendgroup: grouped ? cell : undefined, fill: "tonexty",
                     fillcolor: grouped ? rgba(color, 0.15) : "rgba(40,40,40,0.15)", hoverinfo: "skip"});
      }
      traces.push({type: "scatter", mode: "lines", name: "mean" + suffix, x: mx, y: my, customdata: covered,
                   legendgroup: grouped ? cell : undefined, line: {color, width: 3},
                   hovertemplate: "mean" + suffix + " %{x}: %{y:.4g} (of %{customdata[0]} seeds)<extra></extra>"});
    }
    traces.push({type: "scatter", mode: "markers", name: "stopped", x: stopX, y: stopY, text: stopText,
                 marker: {symbol: "x", size: 12, color: "#b3261e", line: {width: 2}},
                 hovertemplate: "%{text}<extra></extra>"});
    chart.dataset.forecasts = String(traces.filter(t => t.meta === "forecast").length);
    chart.dataset.points = String(points);
    chart.dataset.stopped = String(stopX.length);
    const layout = {
      uirevision: "sweep-" + sweepId + "-" + metric + "-" + xKind,
      margin: {l: 55, r: 10, t: 30, b: 45}, height: 460,
      title: {text: plotText(metric), font: {size: 14}},
      xaxis: {title: {text: xKind === "time" ? "seconds since the run started" : "step"}},
      legend: {orientation: "v"},
    };
    delete chart.dataset.unknownMetric;
    if (!points) layout.annotations = [{text: noPointsText(metric), showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
    Plotly.react(chart, traces, layout, {displaylogo: false, responsive: true});
    el("bucket-note").textContent = (width > 1 ? "each point: a bucket of " + width + " steps (raw: its min and max)" : "") +
      (forecast && xKind === "time" && el("forecast-toggle").checked ? " forecasts: on the step axis only" : "");
  }

  // Why a chart is empty: a key the sweep's runs do not log (a typo) is "no such metric", naming the ones they
  // do; otherwise nothing is logged yet. Keys logged now and then (eval/, system/) may be missing at step 1.
  function noPointsText(key) {
    const logged = JSON.parse(chart.dataset.logged || "[]");
    const periodic = key.startsWith("eval/") || key.startsWith("system/");
    if (!logged.length || logged.includes(key) || periodic) return "no data yet";
    chart.dataset.unknownMetric = key;
    return "no such metric: " + plotText(key) + " (logged: " + logged.slice(0, 8).map(plotText).join(", ") +
      (logged.length > 8 ? ", …" : "") + ")";
  }

  // A run's forecast from its last point to its horizon: the band (low edge, then the high edge filled to it) and
  // the dashed mean, in the run's colour, hidden from the legend (hover says whose it is).
  function forecastTraces(traces, run, name, color, xKind) {
    const f = forecast && xKind === "step" && el("forecast-toggle") && el("forecast-toggle").checked
      ? forecast.runs[run.id] : null;
    if (!f || !f.path.x.length) return;
    const p = clipPath(f.path, buckets[run.id].last[buckets[run.id].last.length - 1]);
    if (p.x.length < 2) return;
    const group = "forecast-" + run.id;
    traces.push({type: "scatter", mode: "lines", name: "forecast low " + name, x: p.x, y: p.lo,
                 line: {width: 0, color}, legendgroup: group, showlegend: false, hoverinfo: "skip"});
    traces.push({type: "scatter", mode: "lines", name: "forecast band " + name, x: p.x, y: p.hi,
                 line: {width: 0, color}, fill: "tonexty", fillcolor: rgba(color, 0.12), legendgroup: group,
                 showlegend: false, hoverinfo: "skip"});
    const final = f.final === null ? "" : "<br>forecast final " + f.final.toPrecision(4) + " [" +
      f.ci[0].toPrecision(4) + ", " + f.ci[1].toPrecision(4) + "]" +
      (f.p === null ? "" : ", P(near-best) " + f.p.toFixed(2));
    traces.push({type: "scatter", mode: "lines", name: "forecast " + name, meta: "forecast", x: p.x, y: p.y,
                 customdata: p.lo.map((lo, i) => [lo, p.hi[i]]), legendgroup: group, showlegend: false,
                 line: {color, width: 1.3, dash: "dash"},
                 hovertemplate: "forecast " + name + " step %{x:.0f}: %{y:.4g} (95 % %{customdata[0]:.4g} to " +
                                "%{customdata[1]:.4g})" + final + "<extra></extra>"});
  }

  // The path from step ``from`` on: a forecast answer may be a few steps older than the curve (it is polled less
  // often and cached while the sweep moves little), so its start, interpolated, joins the curve's last point
  // instead of running over it.
  function clipPath(path, from) {
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

  function startForecasts() {
    if (forecastPoller) forecastPoller.stop();
    forecastPoller = null;
    forecast = null;
    if (!forecastUrl || !el("forecast-toggle") || !el("forecast-toggle").checked) { draw(); return; }
    const asked = metric;
    forecastPoller = pollJson(forecastUrl, {intervalMs: 1500, query: () => "?" + new URLSearchParams({metric: asked}),
      onData(answer) {
        if (asked !== metric) return false;
        forecast = answer;
        draw();
        return !ended;  // once the sweep has ended, this answer was the last
      }});
  }

  function query() {
    const params = new URLSearchParams({metric});
    if (width !== null) { params.set("width", width); params.set("since", sinceParam()); }
    return "?" + params;
  }

  function start() {
    const asked = metric;  // an answer for a metric no longer shown is dropped
    // the page's inline script asked for the first metric's whole curves: used once, for the first start
    const early = first && metric === el("metric").defaultValue ? first : null;
    first = null;
    poller = pollJson(liveUrl, {intervalMs, query, first: early, onData(state) {
      if (asked !== metric) return false;
      merge(state.series);
      runs = state.runs;
      ended = state.ended;
      draw();
      // Too many buckets for the fixed width (the runs grew long): start again with a wider one.
      const most = Math.max(0, ...Object.values(buckets).map(s => s.b.length));
      if (most > 800) { reset(); return false; }
      if (ended) { document.body.dataset.sweepEnded = "true"; return false; }
      return true;
    }});
  }

  function reset() {
    if (poller) poller.stop();
    width = null; buckets = {};
    start();
    startForecasts();
  }

  el("metric").addEventListener("change", () => {
    if (!el("metric").value || el("metric").value === metric) return;
    metric = el("metric").value;
    reset();
  });
  for (const id of ["band", "xaxis"]) el(id).addEventListener("change", draw);
  if (el("forecast-toggle")) el("forecast-toggle").addEventListener("change", startForecasts);
  bindSmoothing(draw);  // static/seedbed/smoothing.js: the app's one remembered setting
  window.sweepDashboard = {state: () => ({width, buckets, runs, ended, metric, forecast})};
  start();
  startForecasts();
}
