"""The ``ifeval`` verifier: instruction-following constraints as IFEval checks them (Zhou et al. 2023,
arXiv 2311.07911; the reference is Google's checkers as lm-eval 0.4.13 ships them, strict mode), with plain
string rules, a seeded language identifier and no data downloaded.

Example: ``{"constraints": [{"type": "lowercase"}, {"type": "word_count", "min": 50}, ...]}``.
Score = (number of constraints met) / (number of constraints). Details list each constraint's verdict and why.
An unknown constraint type or a missing/ill-typed/out-of-range parameter is a bad example: VerifierError
naming the field. A blank response meets no constraint (as in IFEval).

Counting rules (documented because they decide rewards): a *word* is a run of letters, digits, apostrophes
or hyphens (``\\w[\\w'-]*``: "don't" and "well-known" are one word each); a *sentence* ends with ., ! or ?
(closing quotes and brackets may follow) before whitespace or the end, but not after a known abbreviation
(Dr., p.m., U.S., e.g.) or an initial, nor at an ellipsis or abbreviation followed by a lower-case word; a
*paragraph* is a block separated by a blank line or a line of ``***`` (``separator: "***"``: only by ``***``
lines, IFEval's definition); a *bullet* is a line starting with ``*`` or ``-`` and a space; a *highlight* is
``*text*`` or ``**text**`` on one line; a *capital word* is a word whose letters are all upper case (``I``,
``NASA's``, ``U.S.`` included). The differences from IFEval's checkers that remain are deliberate: they are
listed in ``INTENTIONAL_DIFFERENCES`` (rendered in the verifier's docstring and in the README).
"""
from __future__ import annotations

import functools
import json
import re
import unicodedata
from dataclasses import dataclass
from typing import Callable

from training.verifiers.base import Param, VerifierError, VerifierResult, register_verifier
from training.verifiers.ifeval_text import forbidden_form, without_emphasis

_BULLET = re.compile(r"^[ \t]*[*-][ \t]+\S", re.MULTILINE)
MAX_COUNT = 1_000_000  # every min/max/exact and paragraph index is bounded (docs/architecture.md#projects-and-trust)
MAX_TEXT_PARAM = 10_000  # characters in a keyword, phrase, marker or prompt

CHECKS: dict[str, Callable[[str, dict], tuple[bool, str]]] = {}


def constraint(name: str):
    def deco(fn):
        CHECKS[name] = fn
        return fn
    return deco


def _param(c: dict, key: str, kind, default=None, required=True):
    """The constraint's parameter ``key`` checked for type and size; VerifierError naming it otherwise."""
    where = f"ifeval: constraint {c.get('type')!r}"
    if key not in c:
        if required and default is None:
            raise VerifierError(f"{where} needs parameter {key!r}")
        return default
    value = c[key]
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise VerifierError(f"{where}: {key!r} must be an integer; got {value!r}")
        if not 0 <= value <= MAX_COUNT:
            raise VerifierError(f"{where}: {key!r} must be between 0 and {MAX_COUNT}; got {value}")
    if kind is str:
        if not isinstance(value, str):
            raise VerifierError(f"{where}: {key!r} must be a string; got {value!r}")
        if not value.strip() or len(value) > MAX_TEXT_PARAM:
            raise VerifierError(f"{where}: {key!r} must be a non-blank string of at most {MAX_TEXT_PARAM} characters")
    if kind is list:
        if (not isinstance(value, list) or not value or len(value) > 1000
                or not all(isinstance(v, str) and v.strip() and len(v) <= MAX_TEXT_PARAM for v in value)):
            raise VerifierError(f"{where}: {key!r} must be a non-empty list of non-blank strings")
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


@functools.lru_cache(maxsize=1)
def _word_pattern() -> re.Pattern:
    """``\\w[\\w'-]*`` where ``\\w`` also takes the combining marks of the Basic Multilingual Plane and the
    zero-width (non-)joiner, as Unicode's word characters do: Python's ``\\w`` alone cuts Hindi, Tamil or Thai
    words at every vowel sign. (Listed one by one, the class stays a fast bitmap; ranges would not.)"""
    marks = "".join(re.escape(chr(i)) for i in range(0x10000) if unicodedata.category(chr(i)) in ("Mn", "Mc", "Me"))
    word_char = rf"\w{marks}\u200c\u200d"
    return re.compile(rf"[{word_char}][{word_char}'-]*")


def words(text: str) -> list[str]:
    """The words of the text (see the module docstring): ``don't``, ``well-known`` and ``ในเมือง`` are one each."""
    return _word_pattern().findall(text)


# --- sentences ------------------------------------------------------------------------------------------------

# Abbreviations after which a full stop does not end a sentence (lower case, without their final dot).
# Words that are also common English words ("no", "sat", "sun", "wed") are left out: "I said no. Bob left."
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st jr sr inc ltd co corp vs etc e.g i.e a.m p.m u.s u.k u.n fig approx dept gov lt col capt "
    "sgt mt ave jan feb apr jun jul aug sep sept oct nov dec ph.d cf".split())
# Capitalised words that open a new sentence even after an abbreviation or an ellipsis ("... at 5 p.m. The
# next day"), the few that do so in running English text.
_SENTENCE_STARTERS = frozenset(
    "the this these those that it its he she we they i you there here but however so then when while if in on "
    "at after before yet thus also although because my our his her their a an".split())
_CLOSERS = "\"'”’)]}*_"
_OPENERS = "\"'“‘([{*_"


def _ends_sentence(token: str, next_token: str | None) -> bool:
    """Whether ``token`` (whitespace-delimited) closes a sentence, given the token after it.

    A token ends a sentence when it ends in ``.``, ``!`` or ``?`` (closing quotes/brackets may follow), except a
    known abbreviation, an initial (``J.``) or an ellipsis that a lower-case word or a non-starter continues.
    """
    core = token.rstrip(_CLOSERS)
    if not core or core[-1] not in ".!?…":
        return False
    if next_token is None:
        return True
    if core[-1] in "!?":
        return True
    nxt = next_token.lstrip(_OPENERS)
    stem = core.rstrip(".…").lower().lstrip(_OPENERS)
    if core.endswith(("..", "…")) or stem in _ABBREVIATIONS or re.fullmatch(r"[^\W\d_]", stem):
        # after an ellipsis, an abbreviation or an initial, a lower-case word goes on with the sentence ("e.g.
        # the", "wait... then") and a capitalised one starts the next only if it is a typical sentence starter
        if not nxt or nxt[0].islower() or nxt[0] in ",;:" or stem in ("mr", "mrs", "ms", "dr", "prof", "st"):
            return False
        return nxt.lower().rstrip(".,;:!?") in _SENTENCE_STARTERS
    return True


def sentences_count(text: str) -> int:
    """Number of sentences: closed ones (``_ends_sentence``) plus a final one without its full stop."""
    tokens = text.split()
    count, open_sentence = 0, False
    for i, token in enumerate(tokens):
        open_sentence = True
        if _ends_sentence(token, tokens[i + 1] if i + 1 < len(tokens) else None):
            count, open_sentence = count + 1, False
    return count + open_sentence


# --- paragraphs -----------------------------------------------------------------------------------------------

PARAGRAPH_SEPARATORS = ("blank_line", "***")


def paragraphs(text: str, separator: str = "blank_line") -> list[str]:
    """The non-blank paragraphs: separated by a blank line or a ``***`` line, or by ``***`` lines only."""
    if separator == "***":
        pattern = r"^[ \t]*\*\*\*[ \t]*$"
    else:
        pattern = r"\n[ \t]*\n|^[ \t]*\*\*\*[ \t]*$"
    return [p for p in re.split(pattern, text.strip(), flags=re.MULTILINE) if p.strip()]


def _has_blank_middle_paragraph(text: str) -> bool:
    """Two ``***`` lines with nothing between them (IFEval fails such a response)."""
    parts = re.split(r"^[ \t]*\*\*\*[ \t]*$", text.strip(), flags=re.MULTILINE)
    return any(not p.strip() for p in parts[1:-1])


@constraint("lowercase")
def _lowercase(text, c):
    """No upper-case letter and at least one cased letter (``str.islower``)."""
    return text.islower(), "lowercase check"


@constraint("uppercase")
def _uppercase(text, c):
    """No lower-case letter and at least one cased letter (``str.isupper``)."""
    return text.isupper(), "uppercase check"


@constraint("word_count")
def _word_count(text, c):
    return _bounds(len(words(text)), c, "words")


@constraint("sentence_count")
def _sentence_count(text, c):
    return _bounds(sentences_count(text), c, "sentences")


@constraint("paragraph_count")
def _paragraph_count(text, c):
    """Paragraphs between blank lines or ``***`` lines; ``separator: "***"``: only ``***`` lines (IFEval)."""
    separator = _param(c, "separator", str, default="blank_line")
    if separator not in PARAGRAPH_SEPARATORS:
        raise VerifierError(f"ifeval: constraint 'paragraph_count': 'separator' must be one of "
                            f"{list(PARAGRAPH_SEPARATORS)}; got {separator!r}")
    if separator == "***" and _has_blank_middle_paragraph(text):
        return False, "an empty paragraph between two *** lines"
    return _bounds(len(paragraphs(text, separator)), c, "paragraphs")


@constraint("char_count")
def _char_count(text, c):
    return _bounds(len(text.strip()), c, "characters")


@functools.lru_cache(maxsize=4096)
def keyword_pattern(keyword: str) -> re.Pattern:
    """A keyword as a whole word or phrase, any case: stripped, inner spaces as any whitespace, and not inside
    a longer word (``(?<!\\w)``/``(?!\\w)``, so ``U.S.`` and ``C++`` match where ``\\b`` would not)."""
    body = r"\s+".join(re.escape(part) for part in without_emphasis(keyword).split())
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def keyword_count(keyword: str, text: str, forbidden: bool = False) -> int:
    """How many times the keyword is used: markdown emphasis around it is not part of a word (``_climate_``);
    for a forbidden word (``forbidden``) look-alike letters and invisible characters are read through too
    (:mod:`training.verifiers.ifeval_text`)."""
    if forbidden:
        return len(keyword_pattern(forbidden_form(keyword)).findall(forbidden_form(text)))
    return len(keyword_pattern(keyword).findall(without_emphasis(text)))


@constraint("keywords_include")
def _keywords_include(text, c):
    missing = [k for k in _param(c, "keywords", list) if not keyword_count(k, text)]
    return not missing, f"missing {missing}" if missing else "all keywords present"


@constraint("keywords_exclude")
def _keywords_exclude(text, c):
    """No forbidden word, however it is written: emphasis, look-alike letters, invisible characters inside."""
    found = [k for k in _param(c, "keywords", list) if keyword_count(k, text, forbidden=True)]
    return not found, f"forbidden words used: {found}" if found else "no forbidden word"


@constraint("keyword_frequency")
def _keyword_frequency(text, c):
    keyword = _param(c, "keyword", str)
    return _bounds(keyword_count(keyword, text), c, f"times {keyword.strip()!r}")


@constraint("letter_frequency")
def _letter_frequency(text, c):
    letter = _param(c, "letter", str)
    if len(letter) != 1:
        raise VerifierError("ifeval: constraint 'letter_frequency': 'letter' must be one character")
    return _bounds(text.lower().count(letter.lower()), c, f"letters {letter!r}")


_CAPITAL_TOKEN = re.compile(r"[^\W_](?:[\w.'’&/-]*[^\W_])?")


def capital_words(text: str) -> list[str]:
    """Words written in capitals: tokens (letters/digits, with inner ``. ' & / -``) whose cased letters are all
    upper case, a possessive ``'s`` aside: ``NASA's``, ``U.S.``, ``COVID-19`` and ``I`` count."""
    out = []
    for token in _CAPITAL_TOKEN.findall(text):
        stem = re.sub(r"['’]s$", "", token)
        if stem.isupper():
            out.append(stem)
    return out


@constraint("capital_words")
def _capital_words(text, c):
    return _bounds(len(capital_words(text)), c, "all-capital words")


def _strip_fence(text: str) -> str:
    """The response without a leading ```json (or ```) and a trailing ``` fence."""
    t = text.strip()
    t = re.sub(r"^```(?:json|Json|JSON)?", "", t)
    return re.sub(r"```$", "", t).strip()


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
    """Markdown bullets: lines starting with ``*`` or ``-``, a space and some text."""
    return _bounds(len(_BULLET.findall(text)), c, "bullets")


@constraint("title")
def _title(text, c):
    """A non-blank title wrapped in double angular brackets on one line, e.g. <<my title>>."""
    titles = re.findall(r"<<[^\n]+>>", text)
    return any(t.lstrip("<").rstrip(">").strip() for t in titles), "title <<...>> check"


@constraint("starts_with")
def _starts_with(text, c):
    phrase = _param(c, "phrase", str)
    return text.strip().lower().startswith(phrase.strip().lower()), f"starts with {phrase!r}?"


@constraint("ends_with")
def _ends_with(text, c):
    """Ends with the phrase (any case), a closing double quote after it allowed (so it holds with quotation)."""
    phrase = _param(c, "phrase", str)
    return text.strip().strip('"').lower().endswith(phrase.strip().lower()), f"ends with {phrase!r}?"


@constraint("no_commas")
def _no_commas(text, c):
    n = text.count(",") + text.count("，")
    return n == 0, f"{n} commas"


@constraint("quotation")
def _quotation(text, c):
    t = text.strip()
    return len(t) >= 2 and t[0] == '"' and t[-1] == '"', "wrapped in double quotes?"


_PLACEHOLDER = re.compile(r"\[([^\[\]\n]*)\]")


@constraint("placeholders")
def _placeholders(text, c):
    """Square-bracket placeholders such as [address] (non-blank, on one line)."""
    return _bounds(sum(1 for p in _PLACEHOLDER.findall(text) if p.strip()), c, "placeholders")


_BULLET_MARKER = re.compile(r"^([ \t]*)\*(?=[ \t])", re.MULTILINE)
_HIGHLIGHT = re.compile(r"\*\*([^\n*]+)\*\*|\*([^\n*]+)\*")


def highlights(text: str) -> list[str]:
    """Markdown highlights ``*text*`` and ``**text**`` on one line; the text may not start or end with a space
    (``2 * 3 * 4`` is no highlight) and a bullet's ``*`` opens none."""
    body = _BULLET_MARKER.sub(r"\1 ", text)
    found = (m.group(1) or m.group(2) for m in _HIGHLIGHT.finditer(body))
    return [h for h in found if h.strip() and h == h.strip()]


@constraint("highlighted_sections")
def _highlighted(text, c):
    return _bounds(len(highlights(text)), c, "highlighted sections")


def section_marker_pattern(marker: str) -> re.Pattern:
    """``MARKER N`` at the start of a line, markdown (``#``, ``*``, ``_``, ``>``) before it allowed."""
    return re.compile(rf"^[ \t]*[#*_>]*[ \t]*{re.escape(marker.strip())}[ \t]?\d+", re.MULTILINE)


@constraint("sections")
def _sections(text, c):
    """Sections introduced by a marker and a number at a line start, e.g. 'SECTION 1' or '## SECTION 1' or
    '**Section 1**'; counts the markers (the marker's case must match)."""
    marker = _param(c, "marker", str, default="SECTION")
    return _bounds(len(section_marker_pattern(marker).findall(text)), c, f"{marker} markers")


@functools.lru_cache(maxsize=256)
def postscript_pattern(marker: str) -> re.Pattern:
    """The marker in any case, one optional space after each inner dot (``P. S.``), not inside a word."""
    marker = marker.strip()
    body = "".join(re.escape(ch) + (r"\s?" if ch == "." and i < len(marker) - 1 else "")
                   for i, ch in enumerate(marker))
    return re.compile(rf"(?<![\w.]){body}", re.IGNORECASE)


@constraint("postscript")
def _postscript(text, c):
    """A postscript marker anywhere (``P.S.``, ``p.s.``, ``**P.S.**``, ``_P.S._``, ``P. S.``, ``P.P.S``)."""
    marker = _param(c, "marker", str, default="P.S.")
    return bool(postscript_pattern(marker).search(without_emphasis(text))), f"postscript starting {marker!r}?"


def two_responses_parts(text: str) -> list[str] | None:
    """The responses between ``******`` separators, blank ones at either end dropped; None if a middle one is
    blank."""
    parts = text.split("******")
    if any(not p.strip() for p in parts[1:-1]):
        return None
    return [p for p in parts if p.strip()]


@constraint("two_responses")
def _two_responses(text, c):
    """Two different responses separated by six asterisks."""
    parts = two_responses_parts(text)
    if parts is None:
        return False, "an empty response between separators"
    return len(parts) == 2 and parts[0].strip() != parts[1].strip(), f"{len(parts)} parts"


@constraint("repeat_prompt")
def _repeat_prompt(text, c):
    """Starts with the prompt, word for word (case aside, so it can hold together with lowercase), and answers
    after it: the prompt echoed back alone follows nothing."""
    prompt = _param(c, "prompt", str)
    if not text.strip().lower().startswith(prompt.strip().lower()):
        return False, "response starts with the prompt?"
    return _answers_after_prompt(prompt, text), "an answer after the repeated prompt?"


def _answers_after_prompt(prompt: str, text: str) -> bool:
    return bool(re.search(r"\w", text.strip()[len(prompt.strip()):]))


CONSTRAINED_RESPONSES = ("My answer is yes.", "My answer is no.", "My answer is maybe.")


@constraint("constrained_response")
def _constrained_response(text, c):
    """Exactly one of IFEval's options: "My answer is yes.", "My answer is no." or "My answer is maybe."."""
    given = [option for option in CONSTRAINED_RESPONSES if option in text]
    return len(given) == 1, f"options given: {given}"


@constraint("nth_paragraph_first_word")
def _nth_paragraph_first_word(text, c):
    """Exactly ``paragraphs`` blank-line paragraphs, the ``nth`` (from 1) starting with ``first_word`` (any
    case; quotes and markdown before it and punctuation after it aside)."""
    total, nth = _param(c, "paragraphs", int), _param(c, "nth", int)
    first_word = _param(c, "first_word", str).strip()
    if not 1 <= nth <= max(total, 1) or total < 1:
        raise VerifierError("ifeval: constraint 'nth_paragraph_first_word': 'nth' must be between 1 and "
                            f"'paragraphs' (>= 1); got nth={nth}, paragraphs={total}")
    if not re.fullmatch(r"[\w-]+", first_word):
        raise VerifierError("ifeval: constraint 'nth_paragraph_first_word': 'first_word' must be one word "
                            f"(letters, digits, hyphens); got {first_word!r}")
    found = [p for p in re.split(r"\n[ \t]*\n", text.strip()) if p.strip()]
    if len(found) != total:
        return False, f"{len(found)} paragraphs (want {total})"
    word = re.match(r"[\w-]*", found[nth - 1].lstrip(" \t\n" + _OPENERS + "#>")).group(0)
    return word.lower() == first_word.lower(), f"paragraph {nth} starts with {word!r}"


# --- language -------------------------------------------------------------------------------------------------

# IFEval's 30 response languages; langdetect knows 55 (zh-cn and zh-tw read as zh).
IFEVAL_LANGUAGES = ("en", "es", "pt", "ar", "hi", "fr", "ru", "de", "ja", "it", "bn", "uk", "th", "ur", "ta", "te",
                    "bg", "ko", "pl", "he", "fa", "vi", "ne", "sw", "kn", "mr", "gu", "pa", "ml", "fi")


@functools.lru_cache(maxsize=1)
def _language_factory():
    """langdetect's profiles, loaded once per process (about a second), with a fixed seed: its sampling is
    random, and a reward must not change between two calls."""
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.seed = 0
    return factory


@functools.lru_cache(maxsize=1)
def supported_languages() -> frozenset[str]:
    return frozenset(code.split("-")[0] for code in _language_factory().get_lang_list()) | {"zh-cn", "zh-tw"}


# Seeded, so a function of the text: a response checked twice (its language, then an English-only rule) is
# detected once.
@functools.lru_cache(maxsize=1024)
def detect_language(text: str) -> str:
    """The response's language as an ISO 639-1 code (``zh`` for Chinese), by langdetect (Nakatani Shuyo's
    naive Bayes over character n-grams, 55 languages; IFEval's own identifier), seeded; ``unknown`` where the
    text has no letters to go by.

    >>> detect_language("The cat is on the mat and it is happy."), detect_language("Le chat dort sur le tapis.")
    ('en', 'fr')
    """
    from langdetect.lang_detect_exception import LangDetectException

    detector = _language_factory().create()
    detector.append(text)
    try:
        code = detector.detect()
    except LangDetectException:
        return "unknown"
    return "zh" if code.startswith("zh") else code


@constraint("language")
def _language(text, c):
    want = _param(c, "language", str).strip().lower()
    if want not in supported_languages():
        raise VerifierError(f"ifeval: constraint 'language': 'language' must be one of "
                            f"{sorted(supported_languages())}; got {want!r}")
    got = detect_language(text)
    return got == want.split("-")[0] or got == want, f"detected {got!r}, want {want!r}"


# --- intentional differences from IFEval ----------------------------------------------------------------------

@dataclass(frozen=True)
class IntentionalDifference:
    """One deliberate way this verifier's verdict differs from IFEval's checker (lm-eval 0.4.13, strict).

    ``types``: the Seedbed constraint types concerned; ``seedbed_accepts``: True where Seedbed accepts what
    IFEval rejects, False where it rejects what IFEval accepts, None either way; ``applies(constraint,
    response)``: whether a response is in the difference's scope (the differential tests accept a
    disagreement only where one of these applies, in its direction)."""
    name: str
    types: tuple[str, ...]
    seedbed_accepts: bool | None
    what: str
    reason: str
    applies: Callable[[dict, str], bool]


def _keyword_list(c: dict) -> list[str]:
    return list(c.get("keywords") or [c.get("keyword", "")])


def _substring_not_word(c: dict, text: str) -> bool:
    return any(k.strip() and k.strip().lower() in text.lower() and len(re.findall(re.escape(k.strip()), text, re.I))
               != keyword_count(k, text) for k in _keyword_list(c))


def _disguised_forbidden_word(c: dict, text: str) -> bool:
    return any(keyword_count(k, text, forbidden=True) != len(re.findall(rf"\b{re.escape(k.strip())}\b", text, re.I))
               for k in _keyword_list(c))


def _keyword_not_plain(c: dict, text: str) -> bool:
    return any(k != k.strip() or re.search(r"[^\w\s]|\s{2,}", k.strip()) for k in _keyword_list(c))


def _odd_bullet_line(c: dict, text: str) -> bool:
    return any(re.match(r"[ \t]*(?:-|\*(?!\*))", line) and not _BULLET.match(line) for line in text.split("\n"))


def _ifeval_only_highlight(c: dict, text: str) -> bool:
    # a *...* span with a space inside its edge (a bullet marker's span is one), seen as IFEval scans the text
    spans = [m.group(1) or m.group(2) for m in _HIGHLIGHT.finditer(text)]
    return any(s.strip() and s != s.strip() for s in spans)


def _marker_mid_line(c: dict, text: str) -> bool:
    marker = c.get("marker", "SECTION").strip()
    return (len(re.findall(rf"\s?{re.escape(marker)}\s?\d+", text))
            != len(section_marker_pattern(marker).findall(text)))


def _sentence_rule(c: dict, text: str) -> bool:
    """The text has a token the rules decide on: an abbreviation (known, or with an inner dot), an initial,
    an ellipsis, or a sentence mark glued to the next word."""
    for token in text.split():
        core = token.rstrip(_CLOSERS)
        stem = core.rstrip(".…").lower().lstrip(_OPENERS)
        if core.endswith((".", "…")) and (stem in _ABBREVIATIONS or "." in stem or len(stem) == 1
                                          or core.endswith(("..", "…"))):
            return True
        if re.search(r"[.!?…][^\W_]", core):
            return True
    return False


def _odd_paragraph_break(c: dict, text: str) -> bool:
    return bool(re.search(r"\n[ \t]+\n|\n\n\n|\*\*\*", text))


def _first_word_decorated(c: dict, text: str) -> bool:
    found = [p for p in re.split(r"\n[ \t]*\n", text.strip()) if p.strip()]
    nth = c.get("nth", 1)
    if not 1 <= nth <= len(found):
        return False
    first = found[nth - 1].split()[0].lstrip("'").lstrip('"')  # IFEval's first word, before its cut
    return bool(re.match(r"\W", first) or re.search(r"\w[^\w.,?!'\"-]", first)) or _odd_paragraph_break(c, text)


INTENTIONAL_DIFFERENCES: tuple[IntentionalDifference, ...] = (
    IntentionalDifference(
        "blank-detection", ("language",), False,
        "a response with no letters to identify (digits, punctuation, emoji) fails `language`; IFEval counts "
        "langdetect's error as the instruction followed",
        "a reward must not be granted for saying nothing in any language",
        lambda c, t: detect_language(t) == "unknown"),
    IntentionalDifference(
        "whole-word-keywords", ("keywords_include", "keyword_frequency"), None,
        "a keyword matches as a whole word or phrase (`cat` is not in `category`); IFEval searches it as a "
        "substring",
        "`cats` or `concatenate` do not use the word `cat`; counting them rewards the wrong text",
        _substring_not_word),
    IntentionalDifference(
        "literal-keywords", ("keywords_include", "keywords_exclude", "keyword_frequency"), None,
        "a keyword is literal text, stripped, its inner spaces any whitespace (`U.S.`, `C++`, `  river `); IFEval "
        "reads it as a regular expression (`.` any character) between `\\b`s, unstripped",
        "a keyword is text the prompt quotes; IFEval never finds a forbidden `U.S.` before a space",
        _keyword_not_plain),
    IntentionalDifference(
        "disguised-forbidden-words", ("keywords_exclude",), False,
        "a forbidden word is found through markdown emphasis (`_bad_`, `__bad__`), look-alike letters (Cyrillic "
        "`а` for `a`, full-width `ｂａｄ`) and invisible characters inside it (a zero-width space, a soft hyphen); "
        "IFEval matches `\\bword\\b` in the text as written",
        "a word a reader still reads is still used: a disguise must not dodge the ban",
        _disguised_forbidden_word),
    IntentionalDifference(
        "markdown-bullets", ("bullet_count",), None,
        "a bullet is `* ` or `- ` followed by text; IFEval also counts any line starting with `-` (a `---` rule, "
        "`-5 degrees`) or `*` without a space (`*italic* line`)",
        "horizontal rules and negative numbers are not list items",
        _odd_bullet_line),
    IntentionalDifference(
        "markdown-highlights", ("highlighted_sections",), None,
        "a highlight's text may not start or end with a space (`2 * 3 * 4` is none) and a bullet's `*` opens "
        "none; IFEval counts any `*...*` on a line",
        "arithmetic and list markers are not highlighted sections",
        _ifeval_only_highlight),
    IntentionalDifference(
        "section-at-line-start", ("sections",), False,
        "a section marker counts at the start of a line (markdown before it allowed); IFEval counts it anywhere, "
        "also in running text (`see SECTION 2`)",
        "a reference to a section is not a section",
        _marker_mid_line),
    IntentionalDifference(
        "sentence-rules", ("sentence_count",), None,
        "a sentence ends at `.`, `!` or `?` (closing quotes may follow) before a space, not after a known "
        "abbreviation (`Dr.`, `p.m.`, `e.g.`) or an initial, and after an ellipsis only before a capitalised sentence "
        "starter; IFEval uses nltk's Punkt model, whose newspaper statistics decide these cases otherwise",
        "a small, documented rule a user can predict, no model data to ship",
        _sentence_rule),
    IntentionalDifference(
        "word-definition", ("word_count",), None,
        "`don't` and `well-known` are one word each; IFEval counts runs of `\\w` (two each)",
        "a contraction or a hyphenated compound is one word to a reader",
        lambda c, t: bool(re.search(r"\w['-]\w", t))),
    IntentionalDifference(
        "capital-tokens", ("capital_words",), None,
        "a capital word is one written word (`DON'T`, `AT&T`); IFEval tokenizes with nltk's "
        "word_tokenize (`DO` + `N'T`, `AT&T` split at `&`)",
        "one written word is one word",
        lambda c, t: any(re.search(r"[A-Z][^\sA-Za-z0-9]+[A-Za-z0-9]", token) for token in t.split())),
    IntentionalDifference(
        "fullwidth-comma", ("no_commas",), False,
        "the full-width comma `，` is a comma too",
        "a Chinese or Japanese response with commas does not follow 'no commas'",
        lambda c, t: "，" in t),
    IntentionalDifference(
        "empty-placeholder", ("placeholders",), False,
        "`[]` and `[ ]` are not placeholders",
        "an empty bracket holds no place for anything",
        lambda c, t: bool(re.search(r"\[\s*\]", t))),
    IntentionalDifference(
        "one-constrained-option", ("constrained_response",), False,
        "exactly one of the three options may appear; IFEval accepts a response that gives two ('My answer is "
        "yes. My answer is no.')",
        "hedging between the options must not earn the reward",
        lambda c, t: sum(o in t for o in CONSTRAINED_RESPONSES) > 1),
    IntentionalDifference(
        "paragraphs-by-blank-lines", ("nth_paragraph_first_word",), None,
        "paragraphs are separated by any blank line (spaces on it, several in a row); the first word may follow "
        "quotes or markdown (`**Summary**:`) and be followed by any punctuation; IFEval splits on exactly "
        "`\\n\\n` and keeps the characters after the word up to `.`, `,`, `?`, `!` or a quote",
        "a blank line with a space on it still separates paragraphs, and `**Summary**:` starts with `Summary`",
        _first_word_decorated),
    IntentionalDifference(
        "separator-lines", ("paragraph_count",), None,
        "with `separator: \"***\"` only a line of `***` separates paragraphs; IFEval splits at `***` anywhere "
        "(`***bold italic***`, `****`)",
        "emphasis inside a paragraph does not end it",
        lambda c, t: any("***" in line and line.strip() != "***" for line in t.split("\n"))),
    IntentionalDifference(
        "postscript-in-word", ("postscript",), False,
        "the marker may not be glued to a word before it (`maps.s.`)",
        "a postscript marker starts a postscript",
        lambda c, t: bool(re.search(r"[\w.]" + postscript_pattern(c.get("marker", "P.S.")).pattern.split(")", 1)[1],
                                    t, re.IGNORECASE))),
    IntentionalDifference(
        "answer-after-prompt", ("repeat_prompt",), False,
        "the repeated prompt must be followed by an answer (a word after it); IFEval accepts the prompt echoed "
        "back alone",
        "repeating the request is not following it",
        lambda c, t: not _answers_after_prompt(str(c.get("prompt", "")), t)),
)


def differences_markdown() -> str:
    """The intentional differences as a Markdown list (the README's copy is checked against it)."""
    return "\n".join(f"- `{d.name}` ({', '.join(f'`{t}`' for t in d.types)}): {d.what}. *Why:* {d.reason}."
                     for d in INTENTIONAL_DIFFERENCES)


@register_verifier("ifeval")
def ifeval(completion: str, example: dict, *, constraints_key: str = "constraints") -> VerifierResult:
    """Fraction of the example's constraints the completion meets.

    >>> r = ifeval("hello world, all lowercase", {"constraints": [{"type": "lowercase"},
    ...            {"type": "no_commas"}, {"type": "word_count", "min": 3}]})
    >>> round(r.score, 3), [c["ok"] for c in r.details["constraints"]]
    (0.667, [True, False, True])

    Intentional differences from IFEval's checkers (lm-eval 0.4.13, strict mode):
    """
    items = example.get(constraints_key)
    if not isinstance(items, list) or not items or len(items) > 100:
        raise VerifierError(f"ifeval: example field {constraints_key!r} must be a non-empty list of at most 100 "
                            "constraints")
    blank = not completion.strip()
    verdicts = []
    for i, c in enumerate(items):
        if not isinstance(c, dict) or c.get("type") not in CHECKS:
            kind = c.get("type") if isinstance(c, dict) else c
            raise VerifierError(f"ifeval: constraint {i} has unknown type {kind!r}; known: {sorted(CHECKS)}")
        ok, why = CHECKS[c["type"]](completion, c)  # run even on a blank response: bad parameters still raise
        if blank:
            ok, why = False, "blank response"
        verdicts.append({"type": c["type"], "ok": bool(ok), "why": why})
    met = sum(v["ok"] for v in verdicts)
    return VerifierResult(met / len(verdicts), {"constraints": verdicts, "met": met, "total": len(verdicts)})


if ifeval.__doc__:  # (None under python -OO)
    ifeval.__doc__ += "\n" + "\n".join("    " + line for line in differences_markdown().splitlines()) + "\n"
ifeval.PARAMS = {"constraints_key": Param(str, max_len=100)}  # what a reward spec may set (base.Param)
