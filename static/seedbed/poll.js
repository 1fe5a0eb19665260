// The one polling helper of Seedbed's charts (tables and badges are server-rendered fragments polled by htmx).
// pollJson(url, {intervalMs, query, onData, first}): GET url + query() every intervalMs; onData(data) returns
// false to stop. A failed request (server busy or restarting) backs off to four intervals and keeps trying.
// ``first``: the promise of the first answer, fetched by an inline script at the top of the page (earlyJson) so
// that it travels while the browser still parses Plotly; null, or a failed one, and the first tick asks itself.
"use strict";

function pollJson(url, {intervalMs, query = () => "", onData, first = null}) {
  let stopped = false;
  async function tick() {
    if (stopped) return;
    let data = first ? await first : null;
    first = null;
    if (data !== null) {
      query();  // (what the answer covers: a caller keeps its cursors in query)
      if (onData(data) === false) { stopped = true; return; }
      setTimeout(tick, intervalMs);
      return;
    }
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
