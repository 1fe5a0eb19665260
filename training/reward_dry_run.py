"""The reward dry-run at submit: a run on a dataset file whose reference answers its own verifier would not
accept is refused before it starts, instead of training for an hour on rewards that are all 0 (bare
answers "42" scored by ``math``, which wants a final-answer marker, gave 0 to every sample without a word).

The first row's reference answer is given to each verifier of the run as a completion, written the way the
run's prompt asks for the answer (its ``answer_instruction``: ``\\boxed{}``, ``<answer></answer>``, ``####``,
an "Answer:" line, or, when it names none of these, the bare answer — what a model told nothing else would
reply). A verifier that scores that reference below 1, or cannot judge it, is a field error on ``rewards``
that gives its score and its reason.

Bounded and safe: one row, only the verifiers below that judge a completion against the reference answer in
this process, and a time limit (:data:`DRY_RUN_TIMEOUT_S`) after which the check is dropped, not failed.
"""
from __future__ import annotations

import re
import threading

# Verifiers dry-run: those that judge a completion against the row's reference answer, in this process (math's
# equality checks go to its small worker pool only when the answer is outside its fast grammar). The others are
# skipped: ``code`` would start the sandbox and judges the program by the row's tests, not by a reference;
# ``judge`` calls a model (a network endpoint or a local model); ``ifeval`` checks the instruction's constraints
# and ``regex`` a pattern (often a format reward), neither of which the reference answer is written to pass;
# ``countdown`` judges an expression; and an operator's dotted-path verifier does what we cannot know.
DRY_RUN_VERIFIERS = ("math", "exact", "reasoning_gym")
# Settings that only size a verifier's machinery, for one answer: math keeps a pool of worker processes per
# (processes, deadline) for the life of the process that built it (here: a web server's), so one, not two.
DRY_RUN_PARAMS = {"math": {"processes": 1}}
# The knobs that change what the dry-run sees (a sweep's grid point that varies none of them needs no new one).
DRY_RUN_KNOBS = frozenset({"task", "data_path", "prompt_field", "answer_field", "data_fields", "rewards",
                           "answer_instruction"})
# A dry-run that takes longer (an overloaded machine, a math check that starts its worker pool) is given up:
# the check must never refuse a good config for being slow; the run's zero-reward guard still watches it.
DRY_RUN_TIMEOUT_S = 8.0

# The answer forms an instruction may ask for, tried in this order, each with how a reply in that form reads.
_FORMS = (
    ("boxed", re.compile(r"\\boxed|\bboxed\b", re.IGNORECASE), "\\boxed{{{}}}"),
    ("answer_tag", re.compile(r"<answer>", re.IGNORECASE), "<answer>{}</answer>"),
    ("hash", re.compile(r"####"), "#### {}"),
    ("answer_line", re.compile(r"\banswer\s*:", re.IGNORECASE), "Answer: {}"),
)


def asked_form(instruction: str) -> str:
    """The answer form ``instruction`` asks for: boxed, answer_tag, hash, answer_line, or bare (none named).

    >>> asked_form("Put your final answer within \\\\boxed{}."), asked_form("Answer in <answer></answer>.")
    ('boxed', 'answer_tag')
    >>> asked_form("End with '#### <number>'."), asked_form("Finish with 'Answer: <n>'."), asked_form("")
    ('hash', 'answer_line', 'bare')
    """
    for form, pattern, _ in _FORMS:
        if pattern.search(instruction or ""):
            return form
    return "bare"


def as_reply(reference: str, instruction: str) -> str:
    """The reference answer written as a reply in the form ``instruction`` asks for.

    >>> as_reply("42", "Put your final answer within \\\\boxed{}."), as_reply("42", "Reply with the number only.")
    ('\\\\boxed{42}', '42')
    """
    form = asked_form(instruction)
    template = next((t for f, _, t in _FORMS if f == form), "{}")
    return template.format(reference)


def verdict_reason(details: dict) -> str:
    """A verifier's reason for its score, from its details: its ``reason`` (quoted), else what it compared.

    >>> verdict_reason({"reason": "no final answer found"}), verdict_reason({"extracted": "a", "expected": "b"})
    ('"no final answer found"', 'expected "b", got "a"')
    """
    if not isinstance(details, dict):
        return ""
    if details.get("reason"):
        return _quote(str(details["reason"]), 200)
    if "expected" in details and ("extracted" in details or "answer" in details):
        got = details.get("extracted", details.get("answer"))
        return f'expected "{str(details["expected"])[:80]}", got "{str(got)[:80]}"'
    return ""


def _quote(text: str, limit: int = 80) -> str:
    return '"' + (text if len(text) <= limit else text[:limit] + "…") + '"'


def dry_run_verifier(item: dict, example: dict, instruction: str) -> str:
    """"" when the reward spec ``item``'s verifier scores the example's reference answer 1 (or is one that is
    not dry-run, or the example has no reference), else the field message. Built through the registry."""
    from training.verifiers import VerifierError, get_verifier

    name, params = item["name"], item.get("params") or {}
    if name not in DRY_RUN_VERIFIERS:
        return ""
    reference = example.get(params.get("answer_key", "answer"))
    if not isinstance(reference, str) or not reference.strip():
        return ""  # no reference answer (e.g. code judged by its tests): nothing to present
    reply = as_reply(reference.strip(), instruction)
    shown = f"the first row's reference answer {_quote(reference.strip())}"
    if reply != reference.strip():
        shown += f" (given as {_quote(reply)})"
    form = asked_form(instruction)
    asked = (f"answer_instruction asks for the {form} form" if form != "bare" else
             "answer_instruction names no answer form, so a model would reply with the bare answer")
    try:
        try:
            verifier = get_verifier(name, **{**params, **DRY_RUN_PARAMS.get(name, {})})
        except ValueError:  # (the verifier no longer takes that setting: built as the run builds it)
            verifier = get_verifier(name, **params)
        result = verifier(reply, example)
    except VerifierError as exc:
        return f"the {name} verifier cannot judge {shown}: {str(exc)[:300]}"
    except Exception as exc:  # a verifier that crashes here crashes the run too: say so now, not in the worker
        return f"the {name} verifier failed on {shown}: {type(exc).__name__}: {str(exc)[:300]}"
    if result.score >= 1.0:
        return ""
    reason = verdict_reason(result.details)
    return (f"the {name} verifier scores {shown} {result.score!r}" + (f" ({reason})" if reason else "")
            + f"; {asked}. A correct answer would not be rewarded: make answer_instruction ask for the form the "
              "verifier reads "
              "(e.g. 'Put your final answer within \\boxed{}.' for math), or set the verifier's params to read "
              "the form the prompt asks for (e.g. {\"extract\": \"last_number\"}), or check answer_field")


def dry_run_rewards(spec: list[dict], example: dict, instruction: str,
                    timeout_s: float = DRY_RUN_TIMEOUT_S) -> str:
    """"" when every dry-run verifier of ``spec`` scores ``example``'s reference answer 1, else the first
    verifier's message. Runs in a thread joined for at most ``timeout_s``; past it the check is given up ("")."""
    outcome: list[str] = []

    def check() -> None:
        for item in spec:
            problem = dry_run_verifier(item, example, instruction)
            if problem:
                outcome.append(problem)
                return
        outcome.append("")

    worker = threading.Thread(target=check, name="reward-dry-run", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return outcome[0] if outcome else ""


def reward_dry_run_error(config) -> str:
    """"" when ``config`` (a TrainConfig on a dataset file, its fields already valid) rewards its first row's
    reference answer, else the ``rewards`` field message. Tasks not read from a file have nothing to dry-run."""
    from training.data import DatasetError, default_rewards, is_file_task
    from training.first_prompt import first_question

    if not is_file_task(config.task) or not config.data_path:
        return ""
    try:
        example = first_question(config.task, config.data_path, config.prompt_field, config.answer_field,
                                 config.data_fields)
    except (DatasetError, StopIteration):
        return ""  # the dataset check names what is wrong with the file
    spec = config.rewards or default_rewards(config.task)
    return dry_run_rewards(spec, example, config.prompt_template().instruction)
