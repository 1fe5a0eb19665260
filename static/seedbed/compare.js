// The compare page's chart (webapp/runs/compare.py): every run's curve of one metric, from the JSON block the
// page carries, smoothed with the app's one setting (static/seedbed/smoothing.js), on the step or wall-time axis.
"use strict";

(function () {
  const data = document.getElementById("compare-curves");
  const div = document.getElementById("compare-chart");
  if (!data || !div) return;
  const curves = JSON.parse(data.textContent);
  const palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
                   "#bcbd22", "#7f7f7f"];
  const xaxis = document.getElementById("xaxis");
  let smoothing = bindSmoothing((setting) => { smoothing = setting; draw(); });

  function draw() {
    const time = xaxis.value === "time";
    const traces = Object.values(curves).map((c, i) => {
      const keep = c.y.map((y, j) => y !== null && (!time || c.t[j] !== null));
      const xs = (time ? c.t : c.x).filter((_, j) => keep[j]), ys = c.y.filter((_, j) => keep[j]);
      return {name: plotText(c.name), x: xs, y: smoothValues(ys, smoothing.kind, smoothing.param), mode: "lines",
              line: {color: palette[i % palette.length]}};
    });
    div.dataset.traces = String(traces.length);
    summarise();
    Plotly.react(div, traces, {
      uirevision: "compare", height: 420, margin: {l: 50, r: 10, t: 20, b: 40},
      xaxis: {title: {text: time ? "seconds since the run started" : "step"}},
      yaxis: {title: {text: plotText(document.getElementById("compare-metric").value)}},
      legend: {orientation: "h", y: -0.2},
    }, {displaylogo: false, responsive: true});
  }
  // The summary's smoothed final and best smoothed, under this page's smoothing (the server's are for the default).
  function summarise() {
    const table = document.getElementById("compare-summary");
    const best = table && table.dataset.mode === "min" ? Math.min : Math.max;
    Object.entries(curves).forEach(([id, c]) => {
      const row = table && table.querySelector(`tr[data-run="${id}"]`);
      const ys = c.y.filter((y) => y !== null);
      if (!row || !ys.length) return;
      const smoothed = smoothValues(ys, smoothing.kind, smoothing.param);
      row.querySelector(".smoothed-final").textContent = sig4(smoothed[smoothed.length - 1]);
      row.querySelector(".best-smoothed").textContent = sig4(best(...smoothed));
    });
  }
  function sig4(v) { return Number(v.toPrecision(4)).toString(); }  // as the server's sig4 filter writes it
  xaxis.addEventListener("change", draw);
  if (window.Plotly) draw(); else window.addEventListener("load", draw);
})();
