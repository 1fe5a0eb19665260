r"""Text from the server made safe to print: a run's name, a sweep's, a kill reason or an error message is
the words of whoever typed it, and a terminal acts on some characters instead of showing them (ESC and the C1
controls start sequences that set the window's title or write the clipboard, OSC 52; a newline or a carriage
return in a value would forge a table row). :func:`printable` shows each such character escaped, as Python
writes it (``\x1b``, ``\n``, ``\u202e``), and every other character as it is; the server refuses them in the
names and reasons people type, this guards what it stored before, or sends from elsewhere (an error text).
"""
from __future__ import annotations

import unicodedata

# Bidirectional overrides and isolates reorder what follows them on the screen (a name that reads backwards)
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _escaped(ch: str) -> str:
    if unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in BIDI_CONTROLS:
        code = ord(ch)
        return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (
            f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    return ch


def printable(value: object) -> str:
    r"""``str(value)`` with every control character (C0, DEL, C1, line and paragraph separators, bidirectional
    controls) escaped; None is "".

    >>> printable("run \x1b]52;c;ZWNobyBoaQ==\x07 one\nID  NAME"), printable("ésumé · 2"), printable(None)
    ('run \\x1b]52;c;ZWNobyBoaQ==\\x07 one\\nID  NAME', 'ésumé · 2', '')
    >>> printable("\x9b31m\u202eevil")
    '\\x9b31m\\u202eevil'
    """
    text = "" if value is None else str(value)
    if text.isascii() and text.isprintable():  # the common case: nothing to escape
        return text
    return "".join(map(_escaped, text))
