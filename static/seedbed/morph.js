// hx-swap="morph" (with hx-ext="seedbed-morph" on the element or above it): a polled fragment's answer is merged
// into the page instead of replacing it. Each node that is still there stays the same DOM node: only the attributes
// and text that changed are written, nodes that are gone are removed and new ones inserted. So a button whose press
// and release straddle a poll still gets its click, keyboard focus stays where it was, a checked box stays checked
// and a half-typed input keeps its text (a node's properties are never touched, only its attributes).
// Children are matched by key (their id, else data-run, else data-key) and otherwise by position and tag: a row of
// a table stays with its run when rows are added above it. Used by the run page's live header
// (templates/runs/_run_state.html) and the runs list's rows (templates/runs/_run_rows.html).
"use strict";

(function () {
  function keyOf(node) {
    if (node.nodeType !== Node.ELEMENT_NODE) return "";
    return node.id || node.getAttribute("data-run") || node.getAttribute("data-key") || "";
  }

  function syncAttributes(old, neu) {
    for (const attr of Array.from(old.attributes)) {
      if (!neu.hasAttribute(attr.name)) old.removeAttribute(attr.name);
    }
    for (const attr of Array.from(neu.attributes)) {
      if (old.getAttribute(attr.name) !== attr.value) old.setAttribute(attr.name, attr.value);
    }
  }

  // Merge ``neu`` (same tag, same key) into ``old``; the elements it inserts are pushed onto ``inserted``.
  function morphNode(old, neu, inserted) {
    if (old.nodeType === Node.TEXT_NODE || old.nodeType === Node.COMMENT_NODE) {
      if (old.nodeValue !== neu.nodeValue) old.nodeValue = neu.nodeValue;
      return;
    }
    syncAttributes(old, neu);
    morphChildren(old, neu, inserted);
  }

  function morphChildren(old, neu, inserted) {
    const keyed = new Map();
    for (const child of Array.from(old.childNodes)) {
      const key = keyOf(child);
      if (key) keyed.set(child.nodeName + "#" + key, child);
    }
    let cursor = old.firstChild;
    for (const child of Array.from(neu.childNodes)) {
      const key = keyOf(child);
      let match = null;
      if (key) {
        match = keyed.get(child.nodeName + "#" + key) || null;
        keyed.delete(child.nodeName + "#" + key);
      } else if (cursor && !keyOf(cursor) && cursor.nodeType === child.nodeType && cursor.nodeName === child.nodeName) {
        match = cursor;
      }
      if (match) {
        if (match !== cursor) old.insertBefore(match, cursor);  // moved up (a row above it went away)
        morphNode(match, child, inserted);
        cursor = match.nextSibling;
      } else {
        old.insertBefore(child, cursor);  // new: the answer's own node
        if (child.nodeType === Node.ELEMENT_NODE) inserted.push(child);
      }
    }
    while (cursor) {  // what the answer no longer has
      const next = cursor.nextSibling;
      old.removeChild(cursor);
      cursor = next;
    }
  }

  // Merge the answer's element (an outerHTML answer: the polled element itself) into ``target``.
  function morph(target, fragment) {
    const neu = Array.from(fragment.childNodes).find(n => n.nodeType === Node.ELEMENT_NODE);
    const inserted = [];
    if (!neu) return inserted;
    if (neu.nodeName !== target.nodeName || neu.id !== target.id) {  // not the same section: replace it
      target.replaceWith(neu);
      return [neu];
    }
    morphNode(target, neu, inserted);
    return inserted;
  }

  window.seedbedMorph = morph;
  htmx.defineExtension("seedbed-morph", {
    isInlineSwap: (swapStyle) => swapStyle === "morph",
    handleSwap(swapStyle, target, fragment) {
      if (swapStyle !== "morph") return false;
      const inserted = morph(target, fragment);  // (htmx processes the elements returned, as after its own swaps)
      target.dispatchEvent(new CustomEvent("seedbed:morphed", {bubbles: true}));
      return inserted.length ? inserted : true;
    },
  });
})();
