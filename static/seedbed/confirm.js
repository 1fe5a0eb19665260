// A form with data-confirm="question" asks before it is sent (Kill, and any other action that cannot be undone).
// Delegated from the document, so forms that htmx swaps in later ask too. Inline handlers are not used: the
// pages' Content-Security-Policy forbids them.
document.addEventListener("submit", function (event) {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
}, true);
