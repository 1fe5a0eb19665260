// A form with data-confirm="question" asks before it is sent (Kill, and any other action that cannot be undone).
// Delegated from the document, so forms that htmx swaps in later ask too. Inline handlers are not used: the
// pages' Content-Security-Policy forbids them.
// "{step}" in a question is the run's newest step this page knows when the question is asked (its live state
// fragment, its charts' latest point), not the step when the form was drawn.
function liveStep() {
  const shown = document.getElementById("last-step");
  return String(Math.max(Number(shown && shown.textContent) || 0, Number(document.body.dataset.latestStep) || 0));
}

// A form with a select[name=action] asks the chosen option's data-confirm instead ("" asks nothing: the server
// says what is missing), "{count}" in it the number of the form's checked runs ("3 runs").
function questionOf(form) {
  const action = form.querySelector && form.querySelector("select[name=action]");
  const option = action && action.selectedOptions[0];
  const question = option && option.dataset.confirm !== undefined ? option.dataset.confirm
    : form.dataset && form.dataset.confirm;
  if (!question) return "";
  const count = form.querySelectorAll("input[name=run]:checked").length;
  return question.replace("{step}", liveStep()).replace("{count}", count + (count === 1 ? " run" : " runs"));
}

document.addEventListener("submit", function (event) {
  const question = questionOf(event.target);
  if (question && !window.confirm(question)) event.preventDefault();
}, true);
