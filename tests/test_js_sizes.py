"""No JavaScript function in static/ is longer than a screen (80 lines): a page script is module-level functions
with explicit parameters (docs/architecture.md#dashboards), not one closure that holds the whole page.

The scan is a small tokenizer, not a parser: it skips comments, strings, template literals and regular
expression literals, matches braces, and counts a brace as a function's body when it follows ``=>`` or a
parameter list that is not an ``if``/``for``/``while``/``switch``/``catch`` head (``function f(...) {``, a method
``onData(state) {``). A file wrapped in ``(function () { ... })();`` has that as its scope: its functions count.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STATIC = ROOT / "static"
MAX_LINES = 80
_NOT_FUNCTIONS = {"if", "for", "while", "switch", "catch", "with"}
# after these, a "/" starts a regular expression literal rather than a division
_REGEX_AFTER = set("(,=:[!&|?{};+-*%<>~^") | {""}
_REGEX_KEYWORDS = {"return", "typeof", "case", "in", "of", "else", "void", "delete", "throw", "new"}


def _code_only(source: str) -> str:
    """``source`` with comments, strings, template literals and regex literals blanked out (newlines kept)."""
    out, i, n = [], 0, len(source)
    while i < n:
        c, nxt = source[i], source[i + 1:i + 2]
        if c == "/" and nxt == "/":
            end = source.find("\n", i)
            end = n if end < 0 else end
        elif c == "/" and nxt == "*":
            end = source.index("*/", i + 2) + 2
        elif c in "\"'`" or (c == "/" and _regex_may_start(out)):
            end = _literal_end(source, i)
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", source[i:end]))
        i = end
    return "".join(out)


def _regex_may_start(out: list[str]) -> bool:
    """Whether a "/" after the code in ``out`` starts a regex literal (after an operator or a keyword)."""
    text = "".join(out[-40:]).rstrip()
    word = re.search(r"[A-Za-z_$][\w$]*$", text)
    return text[-1:] in _REGEX_AFTER or (word is not None and word.group(0) in _REGEX_KEYWORDS)


def _literal_end(source: str, start: int) -> int:
    """Index just after the string, template or regex literal opening at ``start``."""
    quote, i = source[start], start + 1
    in_class = False  # inside a regex's [...]
    while i < len(source):
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if quote == "/" and c == "[":
            in_class = True
        elif quote == "/" and c == "]":
            in_class = False
        elif c == quote and not in_class:
            if quote == "/":
                while i + 1 < len(source) and source[i + 1].isalpha():  # flags
                    i += 1
            return i + 1
        i += 1
    raise ValueError(f"unterminated literal at offset {start}")


def _is_function_body(code: str, brace: int) -> bool:
    before = code[:brace].rstrip()
    if before.endswith("=>"):
        return True
    if not before.endswith(")"):
        return False
    depth, i = 0, len(before) - 1
    while i >= 0:
        depth += {")": 1, "(": -1}.get(before[i], 0)
        if depth == 0:
            break
        i -= 1
    word = re.search(r"([A-Za-z_$][\w$]*)?\s*$", before[:i]).group(1)
    return word not in _NOT_FUNCTIONS


def _is_iife_end(code: str, brace: int) -> bool:
    """Whether the brace at ``brace`` closes an immediately invoked function: ``(function () {...})();``."""
    return re.match(r"\s*\)\s*\(\s*\)", code[brace + 1:]) is not None


def function_sizes(source: str) -> list[tuple[int, int]]:
    """(first line, lines) of every function body in ``source``, from its opening to its closing brace. A
    top-level immediately invoked function is the file's own scope (an old-style module), not a function: the
    functions inside it are measured."""
    code = _code_only(source)
    stack, sizes = [], []
    for i, c in enumerate(code):
        if c == "{":
            stack.append(i)
        elif c == "}":
            start = stack.pop()
            if _is_function_body(code, start) and not (not stack and _is_iife_end(code, i)):
                first = code.count("\n", 0, start) + 1
                sizes.append((first, code.count("\n", start, i) + 1))
    assert not stack, "unbalanced braces"
    return sorted(sizes)


def test_the_scan_measures_functions_and_ignores_braces_in_literals():
    source = "\n".join([
        "function f(a) {",              # line 1: 6 lines
        "  const s = '{ not a brace';",
        "  if (a) { return /[{]/.test(`${a}}`); }",
        "  const g = (x) => {",         # line 4: 2 lines
        "    return x; };",
        "}",
        "const o = {onData(state) {",   # line 7: a method, 2 lines
        "  return state; }};",
        "for (const k of []) {",        # a loop: not a function
        "}",
        "(function () {",               # a file's scope: not a function
        "  function h() {",             # line 12: 2 lines
        "    return 1; }",
        "  const k = (function () { return 2; })();",  # line 14: invoked at once, but not the file's scope
        "})();",
    ])
    assert function_sizes(source) == [(1, 6), (4, 2), (7, 2), (12, 2), (14, 1)]


@pytest.mark.parametrize("path", sorted(STATIC.rglob("*.js")), ids=lambda p: str(p.relative_to(STATIC)))
def test_no_function_is_over_80_lines(path):
    long = [(line, size) for line, size in function_sizes(path.read_text()) if size > MAX_LINES]
    assert not long, f"{path.relative_to(ROOT)}: functions over {MAX_LINES} lines (line, lines): {long}"
