"""The ``ifeval`` verifier: instruction-following constraints in the spirit of IFEval (Zhou et al. 2023,
arXiv 2311.07911), checked with plain string rules and no data downloaded.

Example: ``{"constraints": [{"type": "lowercase"}, {"type": "word_count", "min": 50}, ...]}``.
Score = (number of constraints met) / (number of constraints). Details list each constraint's verdict and why.
An unknown constraint type or a missing/ill-typed parameter is a bad example: VerifierError naming it.

Counting rules (documented because they decide rewards): a *word* is a run of letters, digits, apostrophes
or hyphens (``\\w[\\w'-]*``); a *sentence* ends with ., ! or ? followed by whitespace or the end; a
*paragraph* is a block separated by a blank line (or a line of ``***``); a *bullet* is a line starting with
``*`` or ``-`` and a space (``**bold**`` lines are not bullets).
"""
from __future__ import annotations

import json
import re
import unicodedata
from typing import Callable

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier

_WORD = re.compile(r"\w[\w'-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_BULLET = re.compile(r"^\s*[*-]\s+\S", re.MULTILINE)

CHECKS: dict[str, Callable[[str, dict], tuple[bool, str]]] = {}


def constraint(name: str):
    def deco(fn):
        CHECKS[name] = fn
        return fn
    return deco


def _param(c: dict, key: str, kind, default=None, required=True):
    if key not in c:
        if required and default is None:
            raise VerifierError(f"ifeval: constraint {c.get('type')!r} needs parameter {key!r}")
        return default
    value = c[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise VerifierError(f"ifeval: constraint {c.get('type')!r}: {key!r} must be an integer; got {value!r}")
    if kind is str and not isinstance(value, str):
        raise VerifierError(f"ifeval: constraint {c.get('type')!r}: {key!r} must be a string; got {value!r}")
    if kind is list and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
        raise VerifierError(f"ifeval: constraint {c.get('type')!r}: {key!r} must be a list of strings")
    return value


def _bounds(count: int, c: dict, what: str) -> tuple[bool, str]:
    """``min``/``max`` (inclusive) or ``exact``; at least one must be given."""
    lo, hi, exact = (_param(c, k, int, required=False) for k in ("min", "max", "exact"))
    if lo is None and hi is None and exact is None:
        raise VerifierError(f"ifeval: constraint {c.get('type')!r} needs 'min', 'max' or 'exact'")
    ok = (lo is None or count >= lo) and (hi is None or count <= hi) and (exact is None or count == exact)
    want = " and ".join(s for s in (f">= {lo}" if lo is not None else "", f"<= {hi}" if hi is not None else "",
                                    f"== {exact}" if exact is not None else "") if s)
    return ok, f"{count} {what} (want {want})"


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n\s*\n|^\s*\*\*\*\s*$", text.strip(), flags=re.MULTILINE) if p and p.strip()]


@constraint("lowercase")
def _lowercase(text, c):
    """Every cased letter is lowercase (and there is at least one letter)."""
    return text == text.lower() and any(ch.isalpha() for ch in text), "lowercase check"


@constraint("uppercase")
def _uppercase(text, c):
    return text == text.upper() and any(ch.isalpha() for ch in text), "uppercase check"


@constraint("word_count")
def _word_count(text, c):
    return _bounds(len(words(text)), c, "words")


@constraint("sentence_count")
def _sentence_count(text, c):
    stripped = text.strip()
    count = len(_SENTENCE_END.findall(stripped))
    if stripped and not re.search(r"[.!?]\W*$", stripped):
        count += 1  # a final sentence without its full stop still counts
    return _bounds(count, c, "sentences")


@constraint("paragraph_count")
def _paragraph_count(text, c):
    return _bounds(len(paragraphs(text)), c, "paragraphs")


@constraint("char_count")
def _char_count(text, c):
    return _bounds(len(text.strip()), c, "characters")


@constraint("keywords_include")
def _keywords_include(text, c):
    missing = [k for k in _param(c, "keywords", list) if not re.search(rf"\b{re.escape(k)}\b", text, re.I)]
    return not missing, f"missing {missing}" if missing else "all keywords present"


@constraint("keywords_exclude")
def _keywords_exclude(text, c):
    found = [k for k in _param(c, "keywords", list) if re.search(rf"\b{re.escape(k)}\b", text, re.I)]
    return not found, f"forbidden words used: {found}" if found else "no forbidden word"


@constraint("keyword_frequency")
def _keyword_frequency(text, c):
    keyword = _param(c, "keyword", str)
    return _bounds(len(re.findall(rf"\b{re.escape(keyword)}\b", text, re.I)), c, f"times {keyword!r}")


@constraint("letter_frequency")
def _letter_frequency(text, c):
    letter = _param(c, "letter", str)
    if len(letter) != 1:
        raise VerifierError("ifeval: constraint 'letter_frequency': 'letter' must be one character")
    return _bounds(text.lower().count(letter.lower()), c, f"letters {letter!r}")


@constraint("capital_words")
def _capital_words(text, c):
    return _bounds(sum(1 for w in words(text) if len(w) > 1 and w.isupper()), c, "all-capital words")


def _strip_fence(text: str) -> str:
    m = re.fullmatch(r"\s*```(?:json)?\s*\n?(.*?)\n?```\s*", text, re.S | re.I)
    return m.group(1) if m else text


@constraint("json_format")
def _json_format(text, c):
    """The whole response is JSON (a ```json fence around it is allowed)."""
    try:
        json.loads(_strip_fence(text))
    except ValueError as exc:
        return False, f"not JSON: {exc}"
    return True, "valid JSON"


@constraint("bullet_count")
def _bullet_count(text, c):
    return _bounds(len(_BULLET.findall(text)), c, "bullets")


@constraint("title")
def _title(text, c):
    """A title wrapped in double angular brackets, e.g. <<my title>>."""
    return bool(re.search(r"<<[^\n<>]+>>", text)), "title <<...>> check"


@constraint("starts_with")
def _starts_with(text, c):
    phrase = _param(c, "phrase", str)
    return text.strip().lower().startswith(phrase.strip().lower()), f"starts with {phrase!r}?"


@constraint("ends_with")
def _ends_with(text, c):
    phrase = _param(c, "phrase", str)
    return text.strip().lower().endswith(phrase.strip().lower()), f"ends with {phrase!r}?"


@constraint("no_commas")
def _no_commas(text, c):
    n = text.count(",") + text.count("，")
    return n == 0, f"{n} commas"


@constraint("quotation")
def _quotation(text, c):
    t = text.strip()
    return len(t) >= 2 and t[0] == '"' and t[-1] == '"', "wrapped in double quotes?"


@constraint("placeholders")
def _placeholders(text, c):
    """Square-bracket placeholders such as [address]."""
    return _bounds(len(re.findall(r"\[[^\[\]\n]+\]", text)), c, "placeholders")


@constraint("highlighted_sections")
def _highlighted(text, c):
    """Markdown highlights *like this* (single asterisks, non-empty)."""
    return _bounds(len(re.findall(r"(?<!\*)\*[^\n*]+\*(?!\*)", text)), c, "highlighted sections")


@constraint("sections")
def _sections(text, c):
    """Sections introduced by a marker and a number, e.g. 'SECTION 1'; counts the markers."""
    marker = _param(c, "marker", str, default="SECTION")
    return _bounds(len(re.findall(rf"^\s*{re.escape(marker)}\s+\d+", text, re.M)), c, f"{marker} markers")


@constraint("postscript")
def _postscript(text, c):
    marker = _param(c, "marker", str, default="P.S.")
    return bool(re.search(rf"^\s*{re.escape(marker)}", text, re.M)), f"postscript starting {marker!r}?"


@constraint("two_responses")
def _two_responses(text, c):
    """Two different responses separated by a line of six asterisks."""
    parts = [p.strip() for p in text.split("******")]
    return len(parts) == 2 and all(parts) and parts[0] != parts[1], f"{len(parts)} parts"


@constraint("repeat_prompt")
def _repeat_prompt(text, c):
    prompt = _param(c, "prompt", str)
    return text.strip().startswith(prompt.strip()), "response starts with the prompt?"


# Small closed-class word lists: enough to tell these languages apart on a paragraph of text.
_STOPWORDS = {
    "en": frozenset("the and of to is in that it was for on are with as be this have not by at".split()),
    "fr": frozenset("le la les et des est un une que du dans pour pas sur qui au avec ce sont".split()),
    "de": frozenset("der die das und ist nicht ein eine zu den mit sich des auf für im dem".split()),
    "es": frozenset("el la los las y es un una que de en por con para no del se al lo".split()),
    "it": frozenset("il lo la gli le e un una che di non per con del della sono è alla".split()),
    "pt": frozenset("o a os as e um uma que de não para com do da em no na são".split()),
    "nl": frozenset("de het een en is van dat niet te op zijn met voor die".split()),
}
_SCRIPTS = {"ru": "CYRILLIC", "el": "GREEK", "ar": "ARABIC", "he": "HEBREW", "hi": "DEVANAGARI", "th": "THAI",
            "ko": "HANGUL", "ja": "HIRAGANA|KATAKANA", "zh": "CJK"}


def detect_language(text: str) -> str:
    """Best guess of the response language: the dominant script, then stop-word counts for Latin scripts.

    >>> detect_language("The cat is on the mat and it is happy."), detect_language("Le chat est sur le tapis.")
    ('en', 'fr')
    """
    letters = [ch for ch in text if ch.isalpha()]
    if not letters:
        return "unknown"
    names = [unicodedata.name(ch, "") for ch in letters]
    for lang in ("ko", "ja"):
        share = sum(1 for n in names if re.match(_SCRIPTS[lang], n)) / len(names)
        if share > 0.2:
            return lang
    for lang, script in _SCRIPTS.items():
        if sum(1 for n in names if n.startswith(script)) / len(names) > 0.5:
            return lang
    tokens = [w.lower() for w in words(text)]
    scores = {lang: sum(1 for t in tokens if t in sw) for lang, sw in _STOPWORDS.items()}
    best = max(scores, key=scores.get)
    return best if scores[best] > 0 else "unknown"


@constraint("language")
def _language(text, c):
    want = _param(c, "language", str)
    got = detect_language(text)
    return got == want, f"detected {got!r}, want {want!r}"


@register_verifier("ifeval")
def ifeval(completion: str, example: dict, *, constraints_key: str = "constraints") -> VerifierResult:
    """Fraction of the example's constraints the completion meets.

    >>> r = ifeval("hello world, all lowercase", {"constraints": [{"type": "lowercase"},
    ...            {"type": "no_commas"}, {"type": "word_count", "min": 3}]})
    >>> round(r.score, 3), [c["ok"] for c in r.details["constraints"]]
    (0.667, [True, False, True])
    """
    items = example.get(constraints_key)
    if not isinstance(items, list) or not items:
        raise VerifierError(f"ifeval: example field {constraints_key!r} must be a non-empty list of constraints")
    verdicts = []
    for i, c in enumerate(items):
        if not isinstance(c, dict) or c.get("type") not in CHECKS:
            kind = c.get("type") if isinstance(c, dict) else c
            raise VerifierError(f"ifeval: constraint {i} has unknown type {kind!r}; known: {sorted(CHECKS)}")
        ok, why = CHECKS[c["type"]](completion, c)
        verdicts.append({"type": c["type"], "ok": bool(ok), "why": why})
    met = sum(v["ok"] for v in verdicts)
    return VerifierResult(met / len(verdicts), {"constraints": verdicts, "met": met, "total": len(verdicts)})


ifeval.PARAMS = {"constraints_key": Param(str, max_len=100)}  # what a reward spec may set (base.Param)
