"""Verifier throughput: math verifications/s (1 and 2 worker processes) and sandboxed code executions/s
(a trivial passing program and a 10-assert test; sequential and with 2 fork servers).

    python bench/verifiers_bench.py [--math-n 2000] [--code-n 300]

Every item is distinct (caches off) so each figure counts real work. Targets on a 2-core machine:
>= 500 math verifications/s across 2 processes, >= 100 sandboxed executions/s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from training.verifiers import VerifierError, get_verifier, score_batch  # noqa: E402


def math_items(n: int):
    """Distinct (completion, example) pairs mixing fractions, radicals, decimals and wrong answers."""
    items = []
    for i in range(n):
        kind = i % 4
        if kind == 0:
            items.append((rf"so \boxed{{\frac{{{i}}}{{2}}}}", {"answer": f"{i / 2}"}))
        elif kind == 1:
            items.append((rf"\boxed{{{i}\sqrt{{2}}}}", {"answer": rf"\sqrt{{{2 * i * i}}}"}))
        elif kind == 2:
            items.append((rf"The answer is \boxed{{{i + 1}}}", {"answer": str(i)}))
        else:
            items.append((rf"\boxed{{x = {i}}}", {"answer": str(i)}))
    return items


def int_items(n: int):
    """Integer answers (GSM8K/AIME style): right, wrong, with thousands separators; decided in the parent."""
    items = []
    for i in range(n):
        gold = 1000 + i
        answer = [f"{gold:,}", str(gold + 1), str(gold), f"{gold}"][i % 4]
        items.append((f"Work... so the total is \\boxed{{{answer}}}.", {"answer": str(gold)}))
    return items


def bench_math(n: int, processes: int, integers: bool = False) -> float:
    v = get_verifier("math", processes=processes, cache_size=0)
    v(r"\boxed{1}", {"answer": "1"})  # start the workers outside the timing
    score_batch(v, [r"\boxed{1}"] * 4 * processes, [{"answer": "1"}] * 4 * processes)
    items = int_items(n) if integers else math_items(n)
    start = time.perf_counter()
    out = score_batch(v, [c for c, _ in items], [e for _, e in items])
    elapsed = time.perf_counter() - start
    errors = sum(isinstance(o, VerifierError) for o in out)
    expected = [1.0, 0.0, 1.0, 1.0] if integers else [1.0, 1.0, 0.0, 1.0]
    wrong = sum(o.score != expected[i % 4] for i, o in enumerate(out) if not isinstance(o, VerifierError))
    assert not errors and not wrong, (errors, wrong)
    return n / elapsed


TEN_ASSERTS = "\n".join(f"assert add({i}, {i + 1}) == {2 * i + 1}" for i in range(10))


def code_items(n: int, ten_asserts: bool):
    items = []
    for i in range(n):
        if ten_asserts:
            program = f"```python\n# variant {i}\ndef add(a, b):\n    return a + b\n```"
            items.append((program, {"tests": TEN_ASSERTS}))
        else:
            items.append((f"```python\nx = {i}\n```", {"tests": f"assert x == {i}"}))
    return items


def bench_code(n: int, processes: int, ten_asserts: bool, sequential: bool) -> float:
    v = get_verifier("code", processes=processes, cache_size=0, timeout_s=5)
    v("```python\nx = 1\n```", {"tests": "assert x == 1"})
    score_batch(v, ["```python\nx = 1\n```"] * 2 * processes, [{"tests": "assert x == 1"}] * 2 * processes)
    items = code_items(n, ten_asserts)
    start = time.perf_counter()
    if sequential:  # one call after the other, as a simple caller would
        out = [v(c, e) for c, e in items]
    else:
        out = score_batch(v, [c for c, _ in items], [e for _, e in items])
    elapsed = time.perf_counter() - start
    bad = [o for o in out if isinstance(o, VerifierError) or o.score != 1.0]
    assert not bad, bad[:2]
    return n / elapsed, out[0].details["layers"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math-n", type=int, default=2000)
    parser.add_argument("--code-n", type=int, default=300)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min): {load:.1f}  (figures scale down with other work on the machine)")
    except OSError:
        pass
    for processes in (1, 2):
        rate = bench_math(args.math_n, processes)
        print(f"math  LaTeX answers   {processes} process(es): {rate:8.1f} verifications/s  (n={args.math_n})")
    for processes in (1, 2):
        rate = bench_math(args.math_n * 5, processes, integers=True)
        print(f"math  integer answers {processes} process(es): {rate:8.1f} verifications/s  (n={args.math_n * 5})")
    layers = None
    for ten, label in ((False, "trivial program"), (True, "10-assert test")):
        for sequential, processes, mode in ((True, 1, "sequential, 1 server"), (False, 2, "batch, 2 servers")):
            rate, layers = bench_code(args.code_n, processes, ten, sequential)
            print(f"code  {label:16s} {mode:22s}: {rate:8.1f} executions/s  (n={args.code_n})")
    print(f"sandbox layers: {layers}")


if __name__ == "__main__":
    main()
