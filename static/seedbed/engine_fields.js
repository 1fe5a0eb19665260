// Run and sweep forms: a knob is hidden under the engines that lack it (data-engine-lacks, the engine registry's
// Engine.lacks, written by webapp/runs/forms.py engine_fields). A hidden field is disabled, so it is not sent
// and takes its default; a field the server found wrong stays shown. Without this script every field is shown
// and the server's validation decides.
(function () {
  const form = document.getElementById("run-form");
  const engine = form.querySelector("[data-engine-select]");
  if (!engine) return;
  function sync() {
    for (const el of form.querySelectorAll("[data-engine-lacks]")) {
      const applies = !el.dataset.engineLacks.split(" ").includes(engine.value);
      const box = el.closest(".field");
      const hide = !applies && !box.classList.contains("has-error");
      box.hidden = hide;
      el.disabled = hide;
    }
  }
  engine.addEventListener("change", sync);
  // switching the preset refills every knob, the engine too (static/seedbed/preset_refill.js, loaded first)
  if (form.elements["preset"]) form.elements["preset"].addEventListener("change", sync);
  sync();
})();
