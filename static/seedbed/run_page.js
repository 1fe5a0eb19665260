// Run page live island: poll the run's JSON endpoint for points after the last step we have, append them,
// redraw each chart with Plotly.react and a fixed uirevision (so zoom and pan survive updates), refresh
// the status and the samples table, and stop polling once the run has ended.
"use strict";

function startRunPage({liveUrl, runId, intervalMs}) {
  const series = {};          // metric key -> {x: [], y: []}
  let since = 0;              // last step received
  let timer = null;
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

  let ended = false;

  function draw() {
    for (const div of charts) {
      const keys = div.dataset.keys.split(",");
      const traces = keys.map((k, i) => ({
        name: k, x: (series[k] || {x: []}).x, y: (series[k] || {y: []}).y,
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

  function cell(text) {
    const td = document.createElement("td");
    td.textContent = text;
    return td;
  }

  let lastSampleStep = 0;  // a step's samples are stored in one transaction: all of a step arrive together

  function addSamples(rows) {
    // A step's samples and its metrics are stored at slightly different times, so samples have their own
    // cursor (samples_since); rows already shown are skipped all the same.
    rows = rows.filter(r => r.step > lastSampleStep);
    if (!rows.length) return;
    lastSampleStep = Math.max(lastSampleStep, ...rows.map(r => r.step));
    const tbody = document.querySelector("#samples tbody");
    // rows come newest step first; insert them above what is there, keeping their order
    const first = tbody.firstChild;
    for (const r of rows) {
      const tr = document.createElement("tr");
      tr.dataset.step = r.step;
      tr.append(cell(r.step), cell(r.prompt), cell(r.completion), cell(r.answer),
                cell(r.reward === null ? "–" : r.reward.toFixed(3)), cell(JSON.stringify(r.details)));
      tbody.insertBefore(tr, first);
    }
    while (tbody.rows.length > 60) tbody.deleteRow(tbody.rows.length - 1);
  }

  function showStatus(state) {
    const badge = document.querySelector(".run-head .status");
    badge.textContent = state.status;
    badge.dataset.status = state.status;
    badge.className = "status status-" + state.status;
    document.getElementById("last-step").textContent = state.last_step;
    if (state.heartbeat_at) document.getElementById("heartbeat").textContent = state.heartbeat_at.slice(11, 19);
    if (state.killed_by) {
      document.getElementById("killed-by").textContent =
        state.killed_by + (state.kill_reason ? " (" + state.kill_reason + ")" : "");
    }
    const err = document.getElementById("run-error");
    if (state.error) { err.textContent = state.error; err.hidden = false; }
    const kill = document.getElementById("kill-form");
    if (kill && (state.ended || state.kill_requested)) kill.hidden = true;
  }

  async function poll() {
    let state;
    try {
      const query = "?since=" + since + "&samples_since=" + lastSampleStep;
      const resp = await fetch(liveUrl + query, {headers: {"Accept": "application/json"}});
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      state = await resp.json();
    } catch (e) {
      timer = setTimeout(poll, intervalMs * 4);  // server busy or restarting: back off, keep trying
      return;
    }
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
    addSamples(state.samples);
    showStatus(state);
    if (state.ended) {
      document.body.dataset.runEnded = "true";
      return;  // the last answer after the end carried every remaining point
    }
    timer = setTimeout(poll, intervalMs);
  }

  poll();
}
