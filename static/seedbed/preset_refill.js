// Run and sweep forms: switching the preset refills the knobs with that preset's values, and records which
// preset they show (rendered_preset) so the server can tell the knobs you changed from the preset's own.
// Preset values hold training knobs only, so a sweep's own fields (seeds, concurrency, policy) are untouched.
(function () {
  const presets = JSON.parse(document.getElementById("preset-values").textContent);
  const form = document.getElementById("run-form");
  const select = form.elements["preset"];
  select.addEventListener("change", function () {
    const values = presets[select.value];
    if (!values) return;
    for (const [name, value] of Object.entries(values)) {
      const el = form.elements[name];
      if (!el || name === "preset") continue;
      if (el.type === "checkbox") el.checked = !!value; else el.value = value;
    }
    form.elements["rendered_preset"].value = select.value;
  });
})();
