// pass@k page chart: one line per model on a log-x chart (Plotly, served locally), with SVG export.
"use strict";

function passKTraces(series) {
  const dashes = ["solid", "dot", "dashdot", "longdash"];
  let other = 0;
  return series.map(s => ({
    name: plotText(s.name), x: s.k, y: s.pass, mode: "lines+markers", marker: {size: 6},
    line: s.base ? {color: "#444", dash: "dash", width: 2} : {dash: dashes[other++ % dashes.length], width: 2},
    hovertemplate: "%{fullData.name}<br>pass@%{x} = %{y:.3f}<extra></extra>",
  }));
}

function drawPassK(div, series, {n, jobId, filename}) {
  const ks = [];
  for (let k = 1; k <= n; k *= 2) ks.push(k);
  if (ks[ks.length - 1] !== n) ks.push(n);
  const layout = {
    uirevision: "eval-" + jobId,
    margin: {l: 60, r: 10, t: 20, b: 50},
    // log axes take their range in log10 units; fixed so an empty chart already spans 1 … n
    xaxis: {type: "log", title: {text: "k (samples per problem)"}, tickvals: ks, ticktext: ks.map(String),
            range: [-0.05, Math.log10(Math.max(n, 2)) + 0.05]},
    yaxis: {title: {text: "pass@k"}, range: [0, 1.02]},
    legend: {orientation: "h", y: -0.2},
    height: 420,
  };
  if (!series.length) {
    layout.annotations = [{text: "no results yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
  }
  // Export with Plotly's own machinery: the modebar's camera gives a PNG, the added button an SVG.
  const config = {
    displaylogo: false, responsive: true, displayModeBar: true,
    toImageButtonOptions: {format: "png", filename: filename, scale: 2},
    modeBarButtonsToAdd: [{
      name: "download-svg", title: "Download plot as SVG", icon: Plotly.Icons.disk || Plotly.Icons.camera,
      click: gd => Plotly.downloadImage(gd, {format: "svg", filename: filename}),
    }],
  };
  return Plotly.react(div, passKTraces(series), layout, config);
}

function startPassKPage({jobId, n, filename}) {
  // The chart only: progress and status (templates/evals/_progress.html) and a problem's completions (each
  // problem row, hx-get into #problem-detail) are server-rendered fragments loaded by htmx.
  const series = JSON.parse(document.getElementById("passk-data").textContent);
  const chart = document.getElementById("passk-chart");
  drawPassK(chart, series, {n, jobId, filename}).then(() => { chart.dataset.ready = "true"; });
}
