// A form with data-max-body (the server's limit on its fields together, data-max-body-words the same in words:
// webapp/too_big.py) measures on submit what it would send. Past the limit it sends nothing and says, next to the
// form, the limit and the field that is too large; every field keeps its value. Without this check the server
// answers a 413 page (the same limit), and the page holding what was typed is left behind.
"use strict";

const MB = 1024 * 1024;

function megabytes(bytes) {
  return (bytes / MB).toFixed(1) + " MB";
}

// The bytes one field takes in the body: urlencoded as a plain form sends it (Django's limit is on the whole
// body), or name and value as UTF-8 in a multipart one (the limit counts its fields, not its files).
function fieldBytes(form, name, value) {
  if (typeof value !== "string") return 0;
  if (form.enctype === "multipart/form-data") return new TextEncoder().encode(name + value).length + 2;
  return new URLSearchParams([[name, value]]).toString().length + 1;
}

function fieldSizes(form, submitter) {
  const sizes = new Map();
  for (const [name, value] of new FormData(form, submitter || null)) {
    sizes.set(name, (sizes.get(name) || 0) + fieldBytes(form, name, value));
  }
  return sizes;
}

function largestField(sizes) {
  let largest = null;
  sizes.forEach((bytes, name) => { if (!largest || bytes > largest.bytes) largest = {name, bytes}; });
  return largest;
}

function fieldLabel(form, name) {
  const input = form.elements.namedItem(name);
  const label = input && input.id && form.querySelector(`label[for="${CSS.escape(input.id)}"]`);
  return label ? label.textContent.trim().replace(/:$/, "") : name;
}

function tooLargeBox(form) {
  let box = document.getElementById("form-too-large");
  if (!box) {
    box = document.createElement("div");
    box.id = "form-too-large";
    box.className = "form-errors";
    box.setAttribute("role", "alert");
    form.before(box);
  }
  return box;
}

function showTooLarge(form, total, largest) {
  const box = tooLargeBox(form);
  box.textContent = "";
  const lead = document.createElement("strong");
  lead.textContent = "Nothing was sent: ";
  box.append(lead, `the form's fields come to ${megabytes(total)}, more than the server accepts: at most ` +
    `${form.dataset.maxBodyWords}. ${fieldLabel(form, largest.name)} is ${megabytes(largest.bytes)}: shorten it.`);
  const input = form.elements.namedItem(largest.name);
  for (let up = input && input.parentElement; up; up = up.parentElement) if (up.tagName === "DETAILS") up.open = true;
  box.scrollIntoView({block: "center"});
  if (input && input.focus) input.focus({preventScroll: true});
}

document.addEventListener("submit", event => {
  const form = event.target;
  const limit = Number(form.dataset && form.dataset.maxBody);
  if (!limit || event.defaultPrevented) return;
  const sizes = fieldSizes(form, event.submitter);
  let total = 0;
  sizes.forEach(bytes => { total += bytes; });
  const previous = document.getElementById("form-too-large");
  if (total <= limit) {
    if (previous) previous.remove();
    return;
  }
  event.preventDefault();
  showTooLarge(form, total, largestField(sizes));
});
