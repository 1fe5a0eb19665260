// The built-in model banner (templates/base.html): while the first run builds the tiny model, show its
// progress every 2 s; once it is ready, say so and stop asking.
(function () {
  const banner = document.getElementById("builtin-model-banner");
  if (!banner) return;
  async function poll() {
    let state;
    try {
      const reply = await fetch(banner.dataset.stateUrl, {headers: {"Accept": "application/json"}});
      if (!reply.ok) return setTimeout(poll, 5000);
      state = await reply.json();
    } catch (err) {
      return setTimeout(poll, 5000);
    }
    if (state.state === "ready") {
      banner.classList.add("done");
      banner.textContent = "The built-in tiny model is ready: runs on it are starting.";
      return;
    }
    if (state.state === "building" && state.step !== undefined) {
      banner.textContent = `Preparing the built-in tiny model (first start only): SFT step ${state.step}, ` +
        `held-out pass@1 ${state.pass1.toFixed(3)} of the ${state.target} it needs. Runs on it start when it is ready.`;
    }
    setTimeout(poll, 2000);
  }
  setTimeout(poll, 2000);
})();
