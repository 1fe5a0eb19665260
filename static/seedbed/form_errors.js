// A form's error summary (templates/_form_errors.html): on load, and on a click of one of its links, open the
// folded <details> that holds the field ("Every other knob"), scroll the field into view and focus its input, so
// an error far down the page is not missed.
"use strict";

function showFieldError(name) {
  const field = document.getElementById("field-" + name);
  if (!field) return false;
  for (let up = field.parentElement; up; up = up.parentElement) if (up.tagName === "DETAILS") up.open = true;
  field.scrollIntoView({block: "center"});
  const input = field.querySelector("input, select, textarea");
  if (input) input.focus({preventScroll: true});
  return true;
}

document.addEventListener("DOMContentLoaded", () => {
  const summary = document.getElementById("form-errors");
  if (!summary) return;
  const links = summary.querySelectorAll("a[data-field]");
  links.forEach(link => link.addEventListener("click", event => {
    if (showFieldError(link.dataset.field)) event.preventDefault();
  }));
  if (links.length) showFieldError(links[0].dataset.field);
});
