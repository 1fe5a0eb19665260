// A sweep's parallel coordinates (templates/sweeps/parallel.html), drawn with the basic bundle's scatter traces
// (Plotly's parcoords needs the full bundle and WebGL, which a machine without a GPU may lack): one axis per knob
// that differs between the runs and the final value last, each scaled to its own range; one line per run,
// coloured by its final value (dark: low, bright: high), its real values on hover.
"use strict";

(function () {
  const data = document.getElementById("parallel-data"), div = document.getElementById("parallel-chart");
  if (!data || !div) return;
  const {runs, dimensions} = JSON.parse(data.textContent);
  const stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];  // viridis

  function colour(t) {  // t in [0, 1] along the stops
    const x = Math.min(Math.max(t, 0), 1) * (stops.length - 1), i = Math.min(Math.floor(x), stops.length - 2);
    const f = x - i, c = stops[i].map((v, k) => Math.round(v + f * (stops[i + 1][k] - v)));
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
  const range = d => { const lo = Math.min(...d.values), hi = Math.max(...d.values); return [lo, hi > lo ? hi : lo + 1]; };
  const text = (d, v) => plotText(d.ticktext ? d.ticktext[v] : (Math.abs(v) >= 1e-3 || v === 0 ? +v.toPrecision(4) : v.toExponential(2)));

  function draw() {
    const ranges = dimensions.map(range), final = dimensions[dimensions.length - 1], [flo, fhi] = ranges[ranges.length - 1];
    const traces = runs.map((run, r) => ({
      x: dimensions.map((_, k) => k),
      y: dimensions.map((d, k) => (d.values[r] - ranges[k][0]) / (ranges[k][1] - ranges[k][0])),
      mode: "lines+markers", line: {color: colour((final.values[r] - flo) / (fhi - flo)), width: 2}, marker: {size: 5},
      name: "run " + run, hoverinfo: "text",
      text: dimensions.map(d => `run ${run} · ${plotText(d.label)}: ${text(d, d.values[r])}`),
    }));
    const annotations = [];
    dimensions.forEach((d, k) => {  // each axis's own top and bottom value (a category's label)
      annotations.push({x: k, y: 1.04, text: text(d, Math.max(...d.values)), showarrow: false, font: {size: 10}});
      annotations.push({x: k, y: -0.04, text: text(d, Math.min(...d.values)), showarrow: false, font: {size: 10}});
    });
    Plotly.react(div, traces, {
      height: 460, showlegend: false, margin: {l: 40, r: 40, t: 40, b: 60}, annotations,
      shapes: dimensions.map((_, k) => ({type: "line", x0: k, x1: k, y0: 0, y1: 1, line: {color: "#888", width: 1}})),
      xaxis: {tickvals: dimensions.map((_, k) => k), ticktext: dimensions.map(d => plotText(d.label)), zeroline: false, showgrid: false},
      yaxis: {visible: false, range: [-0.1, 1.1]},
    }, {displaylogo: false, responsive: true});
    div.dataset.dims = String(dimensions.length);
  }
  if (window.Plotly) draw(); else window.addEventListener("load", draw);
})();
