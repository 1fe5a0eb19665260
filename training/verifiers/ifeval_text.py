"""How the ``ifeval`` verifier reads the words of a response (docs/architecture.md#verifiers): markdown emphasis
is not part of a word, and a forbidden word is found however it is disguised.

* **Emphasis** (:func:`without_emphasis`): an underscore run that opens a word (no letter or digit before it, no
  space after it) or closes one (no space before it, no letter or digit after it) is markdown (``_climate_``,
  ``__climate__``, ``_P.S._``), not part of the word; underscores inside a word (``snake_case``) stay.
  Asterisks are never word characters, so ``*climate*`` needs nothing.
* **Forbidden words** (:func:`forbidden_form`, for ``keywords_exclude`` only: a disguise must not dodge a ban,
  while an included keyword must be written plainly): NFKC compatibility forms (full-width ``ｂａｄ``,
  mathematical ``𝐛𝐚𝐝``), invisible format characters removed (zero-width space and joiners, soft hyphen, word
  joiner, byte-order mark, bidirectional controls: Unicode category Cf), and the Cyrillic and Greek letters that
  look like Latin ones mapped to them (:data:`LOOKALIKES`, after Unicode's confusables list), in the response and
  the keyword alike.

>>> without_emphasis("_climate_ and __P.S.__ but snake_case")
' climate  and   P.S.   but snake_case'
>>> forbidden_form("b\\u0430d b\\u200bad ｂａｄ _bad_")
'bad bad bad  bad '
"""
from __future__ import annotations

import functools
import re
import sys
import unicodedata

# an opening run (no letter or digit before it, no space after) or a closing one (no space before, no letter or
# digit after); a run with a letter or digit on both sides is inside a word
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![^\W_])_+(?=[^\s_])|(?<=[^\s_])_+(?![^\W_])")

# Cyrillic and Greek letters drawn like a Latin letter (Unicode confusables.txt, the single-letter entries of
# these two scripts whose target is one ASCII letter).
LOOKALIKES = str.maketrans(
    "аАВсСеЕһНіІјЈКкМоОрРѕЅТхХуУԁԛԝӏҮүЬ"  # Cyrillic
    "αΑΒΕΖΗιΙκΚΜνΝοΟρΡτΤυΥχΧ",  # Greek
    "aABcCeEhHiIjJKkMoOpPsSTxXyYdqwlYyb"
    "aABEZHiIkKMvNoOpPtTuYxX")


@functools.lru_cache(maxsize=1)
def _invisible() -> re.Pattern:
    """Every format character (category Cf: U+200B zero-width space, U+00AD soft hyphen, U+2060 word joiner,
    U+FEFF, the bidirectional controls, tag characters ...), built once from the running Unicode database."""
    chars = "".join(re.escape(chr(i)) for i in range(sys.maxunicode + 1) if unicodedata.category(chr(i)) == "Cf")
    return re.compile(f"[{chars}]")


def without_emphasis(text: str) -> str:
    """``text`` with markdown emphasis underscores around words turned into spaces (positions kept)."""
    return _EMPHASIS_UNDERSCORE.sub(lambda m: " " * len(m.group()), text)


def forbidden_form(text: str) -> str:
    """``text`` as a forbidden-word check reads it: NFKC, format characters removed, look-alike letters made
    Latin, emphasis underscores dropped (see the module docstring)."""
    text = _invisible().sub("", unicodedata.normalize("NFKC", text))
    return without_emphasis(text.translate(LOOKALIKES))
