// User text drawn by Plotly as text. Plotly renders a subset of HTML in trace names, hover texts, titles, tick
// labels and annotations (<a href> links, <span style> text of any size, <br>), so a run name, a metric key, a
// grid value or a kill reason could draw a link or take over the chart: its "<", ">" and "&" become entities,
// which Plotly shows as the characters themselves. Every chart passes user text through plotText.
"use strict";

function plotText(value) {
  return String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}
