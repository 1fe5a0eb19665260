// Run page charts: poll the run's JSON endpoint for points after the last step we have and redraw each chart
// with Plotly.react and a fixed uirevision (zoom and pan survive updates); stop once the run has ended. The
// status, facts and samples are server-rendered fragments that htmx polls (templates/runs/_run_state.html).
"use strict";

function startRunPage({liveUrl, runId, intervalMs}) {
  const series = {};          // metric key -> {x: [], y: []}
  let since = 0;              // last step received
  let ended = false;
  const charts = Array.from(document.querySelectorAll(".chart"));
  const colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

  function layoutFor(keys) {
    return {
      title: {text: keys.join(" · "), font: {size: 14}},
      uirevision: "run-" + runId + "-" + keys.join(","),
      margin: {l: 50, r: 10, t: 36, b: keys.length > 1 ? 64 : 40},
      xaxis: {title: {text: "step"}},
      showlegend: keys.length > 1,
      legend: {orientation: "h", y: -0.38},
      height: 260,
    };
  }

  function draw() {
    for (const div of charts) {
      const keys = div.dataset.keys.split(",");
      // new arrays each time: Plotly.react compares data by reference, so grown arrays would not be redrawn
      const traces = keys.map((k, i) => ({
        name: k, x: (series[k] || {x: []}).x.slice(), y: (series[k] || {y: []}).y.slice(),
        mode: "lines+markers", marker: {size: 4}, line: {color: colors[i % colors.length]},
      }));
      const points = Math.max(...traces.map(t => t.x.length));
      div.dataset.points = String(points);
      const layout = layoutFor(keys);
      if (points === 0) {
        layout.annotations = [{text: ended ? "not logged by this run" : "no data yet", showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5}];
      }
      Plotly.react(div, traces, layout, {displaylogo: false, responsive: true});
    }
  }

  pollJson(liveUrl, {
    intervalMs,
    query: () => "?since=" + since,
    onData(state) {
      let changed = false;
      for (const [key, s] of Object.entries(state.series)) {
        const dst = series[key] || (series[key] = {x: [], y: []});
        for (let i = 0; i < s.x.length; i++) {
          dst.x.push(s.x[i]);
          dst.y.push(s.y[i]);
          if (s.x[i] > since) since = s.x[i];
        }
        changed = changed || s.x.length > 0;
      }
      ended = state.ended;
      if (changed || ended || !charts[0].data) draw();
      if (ended) document.body.dataset.runEnded = "true";  // the last answer after the end carried every point
      return !ended;
    },
  });
}
