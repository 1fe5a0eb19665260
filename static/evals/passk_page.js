// pass@k page: one line per model on a log-x chart (Plotly, served locally), progress polling while the
// job runs (the page reloads once when it ends), and a problem's completions loaded on click.
"use strict";

function passKTraces(series) {
  const dashes = ["solid", "dot", "dashdot", "longdash"];
  let other = 0;
  return series.map(s => ({
    name: s.name, x: s.k, y: s.pass, mode: "lines+markers", marker: {size: 6},
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

function startPassKPage({jobId, n, ended, progressUrl, problemUrl, filename}) {
  const series = JSON.parse(document.getElementById("passk-data").textContent);
  const chart = document.getElementById("passk-chart");
  drawPassK(chart, series, {n, jobId, filename}).then(() => { chart.dataset.ready = "true"; });

  const panel = document.getElementById("problem-detail");
  async function openProblem(index) {
    panel.dataset.loading = index;
    const resp = await fetch(problemUrl + index + "/");
    panel.innerHTML = resp.ok ? await resp.text() : "<p class='error'>Could not load problem " + index + "</p>";
    delete panel.dataset.loading;
    for (const tr of document.querySelectorAll("#problems tr.selected")) tr.classList.remove("selected");
    const row = document.getElementById("problem-" + index);
    if (row) row.classList.add("selected");
    panel.scrollIntoView({block: "nearest"});
  }
  document.addEventListener("click", ev => {
    const link = ev.target.closest("[data-open-problem]");
    const row = ev.target.closest("#problems tr[data-problem]");
    if (link) { ev.preventDefault(); openProblem(link.dataset.openProblem); }
    else if (row) openProblem(row.dataset.problem);
  });

  if (ended) return;
  async function poll() {
    try {
      const resp = await fetch(progressUrl, {headers: {"Accept": "application/json"}});
      if (resp.ok) {
        const s = await resp.json();
        document.getElementById("progress").value = s.done;
        document.getElementById("progress-text").textContent = s.done + " / " + s.total;
        const badge = document.querySelector(".run-head .status");
        badge.textContent = s.status;
        badge.className = "status status-" + s.status;
        badge.dataset.status = s.status;
        if (s.ended) { window.location.reload(); return; }
      }
    } catch (e) { /* server busy: try again */ }
    setTimeout(poll, 1000);
  }
  poll();
}
