// The one polling helper of Seedbed's charts (tables and badges are server-rendered fragments polled by htmx).
// pollJson(url, {intervalMs, query, onData}): GET url + query() every intervalMs; onData(data) returns false to
// stop. A failed request (server busy or restarting) backs off to four intervals and keeps trying.
"use strict";

function pollJson(url, {intervalMs, query = () => "", onData}) {
  let stopped = false;
  async function tick() {
    if (stopped) return;
    let data;
    try {
      const resp = await fetch(url + query(), {headers: {"Accept": "application/json"}});
      if (!resp.ok) throw new Error("HTTP " + resp.status);
      data = await resp.json();
    } catch (e) {
      setTimeout(tick, intervalMs * 4);
      return;
    }
    if (onData(data) === false) { stopped = true; return; }
    setTimeout(tick, intervalMs);
  }
  tick();
  return {stop() { stopped = true; }, now() { tick(); }};
}
