// Curve smoothing, one setting for every chart of the app (the run page's charts, the sweep dashboard), kept in
// the browser (localStorage "seedbed.smoothing") so it is the same on the next page and the next visit.
// A page with a #smoothing select and a #smooth-param box binds them with bindSmoothing(onChange).
"use strict";

// Debiased EMA (TensorBoard's slider): m_t = w m_{t-1} + (1-w) x_t, m_0 = 0; s_t = m_t / (1 - w^t).
function debiasedEma(values, w) {
  let m = 0, out = [];
  for (let t = 0; t < values.length; t++) {
    m = w * m + (1 - w) * values[t];
    out.push(w === 0 ? m : m / (1 - Math.pow(w, t + 1)));
  }
  return out;
}

// Mean of the last `window` values (fewer at the start).
function runningMean(values, window) {
  const out = [];
  let sum = 0;
  for (let i = 0; i < values.length; i++) {
    sum += values[i];
    if (i >= window) sum -= values[i - window];
    out.push(sum / Math.min(i + 1, window));
  }
  return out;
}

function smoothValues(values, kind, param) {
  if (kind === "ema") return debiasedEma(values, Math.min(Math.max(param, 0), 0.999));
  if (kind === "mean") return runningMean(values, Math.max(1, Math.round(param)));
  return values.slice();
}

const SMOOTHING_KEY = "seedbed.smoothing";
const SMOOTHING_DEFAULT = {kind: "ema", param: 0.6};

function loadSmoothing() {
  try {
    const saved = JSON.parse(window.localStorage.getItem(SMOOTHING_KEY) || "null");
    if (saved && ["ema", "mean", "none"].includes(saved.kind) && Number.isFinite(saved.param)) return saved;
  } catch (e) { /* no storage (private mode) or a bad value: the default */ }
  return Object.assign({}, SMOOTHING_DEFAULT);
}

function saveSmoothing(setting) {
  try { window.localStorage.setItem(SMOOTHING_KEY, JSON.stringify(setting)); } catch (e) { /* not kept */ }
}

// Show the remembered setting in #smoothing / #smooth-param, keep it when they change, call onChange(setting).
function bindSmoothing(onChange) {
  const kind = document.getElementById("smoothing"), param = document.getElementById("smooth-param");
  const setting = loadSmoothing();
  kind.value = setting.kind;
  param.value = setting.param;
  kind.addEventListener("change", () => {
    param.value = kind.value === "mean" ? 5 : 0.6;  // a window for the running mean, a weight for the EMA
    changed();
  });
  param.addEventListener("change", changed);
  function changed() {
    const next = {kind: kind.value, param: parseFloat(param.value) || 0};
    saveSmoothing(next);
    onChange(next);
  }
  return setting;
}
