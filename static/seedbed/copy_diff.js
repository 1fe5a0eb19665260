// "Re-run with changes" (webapp.runs.copies): the form opens filled with a run's (or sweep's) settings; this
// lists, before launch, each field whose value now differs from the original's ("lr: 1e-05 → 2e-05").
// JSON boxes compare by value, so re-spacing a reward spec is no change.
(function () {
  const data = document.getElementById("copy-original");
  const form = document.getElementById("run-form");
  const list = document.getElementById("copy-diff");
  const none = document.getElementById("copy-diff-none");
  if (!data || !form || !list) return;
  const original = JSON.parse(data.textContent);

  function current(el) {
    if (el.type === "checkbox") return el.checked;
    return el.value;
  }
  function same(a, b) {
    if (typeof a === "boolean" || typeof b === "boolean") return a === b;
    if (a === b) return true;
    try { return JSON.stringify(JSON.parse(a)) === JSON.stringify(JSON.parse(b)); } catch (e) { return false; }
  }
  function shown(v) {
    if (typeof v === "boolean") return v ? "true" : "false";
    return v === "" ? "(empty)" : v.replace(/\s*\n\s*/g, "; ");
  }
  function render() {
    list.replaceChildren();
    for (const [name, before] of Object.entries(original)) {
      const el = form.elements[name];
      if (!el) continue;
      const after = current(el);
      if (same(before, after)) continue;
      const item = document.createElement("li");
      item.dataset.key = name;
      item.textContent = name + ": " + shown(before) + " → " + shown(after);
      list.appendChild(item);
    }
    if (none) none.hidden = list.children.length > 0;
  }
  form.addEventListener("input", render);
  form.addEventListener("change", render);
  render();
})();
