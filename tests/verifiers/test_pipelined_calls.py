"""Runs of calls sent to the program at once: the test process sends consecutive steps that each call one of the
program's functions with literal arguments (``assert f(2) == 4``) together, and reads the answers in turn. The
reports must be exactly those of the same steps evaluated one after the other, whatever the program does."""
from __future__ import annotations

import copy
import textwrap

import pytest

from training.verifiers import get_verifier


def fenced(code: str) -> str:
    return "```python\n" + textwrap.dedent(code).strip() + "\n```"


@pytest.fixture(scope="module")
def verifier():
    v = get_verifier("code", processes=1, cache_size=0, timeout_s=3, partial_credit=True)
    yield v
    v.sandbox.close()


ASSERTS = "\n".join(f"assert f({i}, {i + 1}) == {2 * i + 1}" for i in range(6))

# (program, example): each one a way the program can answer, fail or break a run of calls
CORPUS = {
    "right": ("def f(a, b):\n    return a + b", {"tests": ASSERTS}),
    "wrong_on_some": ("def f(a, b):\n    return a + b if a % 2 else 0", {"tests": ASSERTS}),
    "raises": ("def f(a, b):\n    if a == 2:\n        raise ValueError('two')\n    return a + b", {"tests": ASSERTS}),
    "own_exception": ("class Odd(Exception):\n    pass\ndef f(a, b):\n    if a % 2:\n        raise Odd(a)\n"
                      "    return a + b", {"tests": ASSERTS}),
    "unsendable": ("def f(a, b):\n    return {a, b} if a == 3 else a + b", {"tests": ASSERTS}),
    "missing": ("def g(a, b):\n    return a + b", {"tests": ASSERTS}),
    "not_callable": ("f = 5", {"tests": ASSERTS}),
    "a_module": ("import math as f", {"tests": ASSERTS}),
    "a_class": ("class f:\n    def __init__(self, a, b):\n        self.s = a + b", {"tests": ASSERTS}),
    "stateful": ("n = [0]\ndef f(a, b):\n    n[0] += 1\n    return a + b if n[0] != 4 else -1", {"tests": ASSERTS}),
    "exits_mid_run": ("import os\ndef f(a, b):\n    if a == 3:\n        os._exit(0)\n    return a + b",
                      {"tests": ASSERTS}),
    "system_exit": ("import sys\ndef f(a, b):\n    if a == 1:\n        sys.exit(3)\n    return a + b",
                    {"tests": ASSERTS}),
    "hangs_on_the_third": ("def f(a, b):\n    while a == 2:\n        pass\n    return a + b", {"tests": ASSERTS}),
    "big_answers": ("def f(a, b):\n    return 'x' * 300_000 if a < 5 else a + b", {"tests": ASSERTS}),
    "strings_lists_dicts": ("def f(a, b=None):\n    return [a, b]",
                            {"tests": "assert f('a', [1, 2.5]) == ['a', [1, 2.5]]\nassert f({'k': None}) == "
                                      "[{'k': None}, None]\nassert f(True, -3) == [True, -3]"}),
    "entry_point_named_like_a_builtin": ("def sorted(x):\n    return list(reversed(x))",
                                         {"tests": "assert sorted([1, 2]) == [2, 1]\nassert sorted([3]) == [3]",
                                          "entry_point": "sorted"}),
    "between_other_steps": ("def f(a, b):\n    return a + b",
                            {"tests": "assert f(1, 2) == 3\nassert f(2, 2) == 4\nx = f(0, 0)\nassert x == 0\n"
                                      "assert f(5, 5) == 10\nassert f(1, 1) == 2\nassert f(3, 1) == 4"}),
}


def requests(v, program: str, example: dict) -> tuple[dict, dict, list, list]:
    """(the request as planned, the same with no step marked as a call, steps, checks)."""
    steps, checks, tests_side = v._plan(example)
    planned = {"code": program, "steps": steps, **tests_side, **v.limits}
    one_by_one = copy.deepcopy(planned)
    for step in one_by_one["steps"]:
        step.pop("call", None)
    return planned, one_by_one, steps, checks


@pytest.mark.parametrize("name", list(CORPUS))
def test_a_run_of_calls_reports_as_one_call_after_the_other(verifier, name):
    program, example = CORPUS[name]
    planned, one_by_one, steps, checks = requests(verifier, program, example)
    assert sum("call" in step for step in steps) >= 2  # the case sends calls at once
    together, alone = verifier.sandbox.run_many([planned, one_by_one])
    assert together["status"] == alone["status"]
    assert together["reports"] == alone["reports"]
    layers = verifier.sandbox.layers
    a, b = verifier._judge(together, steps, checks, layers), verifier._judge(alone, steps, checks, layers)
    assert (a.score, a.details["passed"], a.details["first_failure"]) == (
        b.score, b.details["passed"], b.details["first_failure"])


def test_the_calls_arrive_together():
    """The program finds the next call already read when it answers one (in its harness's buffer, the frame
    that called it): sent at once, and not when the steps are not marked."""
    v = get_verifier("code", processes=1, cache_size=0, timeout_s=3, partial_credit=True)
    try:
        program = "import sys\ndef waiting(i):\n    return b'\"call\"' in sys._getframe(1).f_locals['buf']"
        planned, one_by_one, _, _ = requests(v, program, {"tests": "assert waiting(0) == True\n"
                                                                    "assert waiting(1) == True\n"
                                                                    "assert waiting(2) == False"})
        together, alone = v.sandbox.run_many([planned, one_by_one])
        assert '"value": true' in together["reports"].split("\n")[2]  # call 0 saw call 1 waiting
        assert '"value": false' in alone["reports"].split("\n")[2]   # one by one, nothing waits
    finally:
        v.sandbox.close()


def test_the_plan_marks_only_plain_calls_of_the_programs_names():
    from training.verifiers.code import plan_tests
    steps, _ = plan_tests("assert f(1, 'a', [2.5, None], {'k': True}) == 1\nassert f((1, 2)) == 1\n"
                          "assert f(x=1) == 1\nassert f(*[1]) == 1\nassert len([1]) == 1\nassert f({1: 2}) == 1\n"
                          "assert f(-1) == 1\nassert f(1e999) == 1\nassert g.h(1) == 1")
    assert [step.get("call") for step in steps] == [["f", [1, "a", [2.5, None], {"k": True}]], None, None, None,
                                                    None, None, ["f", [-1]], None, None]
