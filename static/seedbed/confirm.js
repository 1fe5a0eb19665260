// A form with data-confirm="question" asks before it is sent (Kill, and any other action that cannot be undone).
// Delegated from the document, so forms that htmx swaps in later ask too. Inline handlers are not used: the
// pages' Content-Security-Policy forbids them.
// "{step}" in a question is the run's newest step this page knows when the question is asked (its live state
// fragment, its charts' latest point), not the step when the form was drawn.
function liveStep() {
  const shown = document.getElementById("last-step");
  return String(Math.max(Number(shown && shown.textContent) || 0, Number(document.body.dataset.latestStep) || 0));
}

document.addEventListener("submit", function (event) {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question.replace("{step}", liveStep()))) event.preventDefault();
}, true);
