// The runs list's "Compare selected": a plain link to the compare page with the checked runs (?run=3&run=17), kept
// up to date as boxes are checked. It is not a submit button of the bulk form, so it never asks the bulk actions'
// question and its address carries no csrf token, no action and no tags.
"use strict";

(function () {
  function updateCompareLink() {
    const link = document.getElementById("bulk-compare");
    if (!link) return;
    const picked = Array.from(document.querySelectorAll("#runs input[name=run]:checked"), box => box.value);
    const query = new URLSearchParams(picked.map(id => ["run", id])).toString();
    link.href = link.dataset.base + (query ? "?" + query : "");
    link.setAttribute("aria-disabled", picked.length ? "false" : "true");
  }

  document.addEventListener("change", (event) => {
    if (event.target.matches && event.target.matches("#runs input[name=run]")) updateCompareLink();
  });
  document.addEventListener("seedbed:morphed", updateCompareLink);  // a row gone from the list leaves the link
  document.addEventListener("DOMContentLoaded", updateCompareLink);  // boxes the browser restored on back/forward
})();
