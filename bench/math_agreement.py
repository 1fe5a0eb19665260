"""Agreement of the ``math`` verifier with Math-Verify 0.9.0, in both modes: on Seedbed's own case table
(tests/verifiers/math_peer_cases.py) and, given its folder, on Math-Verify's own test suite (not in this repo).

    python bench/math_agreement.py [--suite DIR] [--hedges] [-v]

DIR is the ``tests/`` folder of Math-Verify's source distribution, fetched from PyPI with its ordinary client:
``pip download math-verify==0.9.0 --no-binary :all: --no-deps`` and unpacked. Its parametrized tests are run
as they are with ``compare_strings`` wrapped to record each (gold, prediction) it compares; each recorded pair
with the test's ``expected`` verdict is then scored by Seedbed. Printed per mode: agreement with the expected
verdicts, agreement with Math-Verify run with its default settings on the same texts (``verify(parse(gold),
parse(prediction))``: some of its tests set other options), and how many differences are the listed
intentional ones (``INTENTIONAL_DIFFERENCES``). ``--hedges`` adds the 4,000 seeded hedges and lists of
``tests/verifiers/test_math_hedges.py`` (every answer form; the gold written as LaTeX, ``$gold$``), whose
expected verdict is Math-Verify's own. ``-v`` prints every other difference.
"""
from __future__ import annotations

import argparse
import inspect
import os
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from math_verify import parse, verify  # noqa: E402

from training.verifiers import VerifierError, get_verifier, score_batch  # noqa: E402
from training.verifiers.math_answer import intentional_difference  # noqa: E402

MODES = ("strict", "lenient")
# Math-Verify's test modules whose parametrized cases are (gold, prediction, expected) comparisons
SUITE_MODULES = ("test_all", "test_boxed", "test_numina_cases", "test_open_thoughts", "test_strict", "test_yujianll")


def table_cases() -> list[dict]:
    """Seedbed's own written cases."""
    from tests.verifiers.math_peer_cases import FLAT

    return [{"gold": g, "pred": c, "expected": e, "source": group} for group, g, c, e in FLAT]


def hedge_cases() -> list[dict]:
    """The property test's generated hedges and lists, Math-Verify's verdict as the expected one."""
    from tests.verifiers.test_math_hedges import N_CASES, SEED, generated, reference

    return [{"gold": f"${g}$", "pred": c, "expected": int(reference(g, c)), "source": "hedges"}
            for g, c in generated(N_CASES, SEED)]


def _load_suite_module(folder: str, name: str, package: str) -> types.ModuleType:
    """Import ``folder/name.py`` as ``package.name`` (its ``from tests.x import`` lines point at the package)."""
    source = open(os.path.join(folder, f"{name}.py")).read().replace("from tests.", f"from {package}.")
    module = types.ModuleType(f"{package}.{name}")
    module.__file__ = os.path.join(folder, f"{name}.py")
    sys.modules[module.__name__] = module
    exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


def suite_cases(folder: str) -> list[dict]:
    """(gold, prediction, expected) of Math-Verify's own tests: each parametrized case run once with
    ``compare_strings`` (or ``verify``) recording what it compares; cases that compare more than one pair or
    none are left out."""
    package = "_math_verify_suite"
    sys.modules[package] = types.ModuleType(package)
    sys.modules[package].__path__ = [folder]
    calls: list[tuple[str, str]] = []
    base = _load_suite_module(folder, "test_all", package)
    compare = base.compare_strings

    def recording_compare(gold, pred, *args, **kwargs):
        calls.append((gold, pred))
        return compare(gold, pred, *args, **kwargs)

    def recording_verify(gold, pred, *args, **kwargs):  # tests that call parse/verify themselves
        calls.append((recording_verify.last_parsed.get(id(gold), None), recording_verify.last_parsed.get(id(pred))))
        return verify(gold, pred, *args, **kwargs)

    def recording_parse(text, *args, **kwargs):
        parsed = parse(text, *args, **kwargs)
        recording_verify.last_parsed[id(parsed)] = text
        return parsed

    recording_verify.last_parsed = {}
    cases = []
    for name in SUITE_MODULES:
        if not os.path.exists(os.path.join(folder, f"{name}.py")):
            continue
        module = base if name == "test_all" else _load_suite_module(folder, name, package)
        module.compare_strings = recording_compare
        if name == "test_yujianll":
            module.parse, module.verify = recording_parse, recording_verify
        for fname, fn in inspect.getmembers(module, inspect.isfunction):
            for mark in getattr(fn, "pytestmark", []) if fname.startswith("test_") else []:
                if mark.name != "parametrize":
                    continue
                names = mark.args[0].split(",") if isinstance(mark.args[0], str) else mark.args[0]
                names = [n.strip() for n in names]
                for values in mark.args[1]:
                    params = dict(zip(names, getattr(values, "values", values)))
                    expected = params.get("expected", params.get("result"))
                    if expected is None:
                        continue
                    calls.clear()
                    try:
                        fn(**params)
                    except AssertionError:
                        pass
                    except Exception:  # noqa: BLE001 - a case this harness cannot replay is left out
                        continue
                    if len(calls) == 1 and all(isinstance(x, str) for x in calls[0]):
                        cases.append({"gold": calls[0][0], "pred": calls[0][1], "expected": int(expected),
                                      "source": f"{name}.{fname}"})
    return cases


def measure(cases: list[dict], verbose: bool) -> None:
    reference = [float(verify(parse(c["gold"]), parse(c["pred"]))) for c in cases]
    right = sum(r == c["expected"] for r, c in zip(reference, cases))
    print(f"  {len(cases)} cases; Math-Verify with default settings gives the expected verdict on {right}")
    for mode in MODES:
        verifier = get_verifier("math", mode=mode, processes=2, cache_size=0)
        out = score_batch(verifier, [c["pred"] for c in cases], [{"answer": c["gold"]} for c in cases])
        scores = [None if isinstance(o, VerifierError) else o.score for o in out]
        vs_expected = sum(s == c["expected"] for s, c in zip(scores, cases))
        vs_reference = sum(s == r for s, r in zip(scores, reference))
        listed = [o for s, r, o in zip(scores, reference, out)
                  if s == 0.0 and r == 1.0 and intentional_difference(o.details, mode)]
        other = [(c, s, r, o) for c, s, r, o in zip(cases, scores, reference, out)
                 if s != r and not (s == 0.0 and r == 1.0 and intentional_difference(o.details, mode))]
        print(f"  {mode:8s} agrees with the expected verdicts on {vs_expected}/{len(cases)} "
              f"({vs_expected / len(cases):.1%}), with Math-Verify's own on {vs_reference}/{len(cases)} "
              f"({vs_reference / len(cases):.1%}); listed intentional differences {len(listed)}, others {len(other)}")
        if verbose:
            for c, s, r, o in other:
                why = str(o) if isinstance(o, VerifierError) else o.details.get("reason")
                print(f"      {c['source']}: gold {c['gold'][:60]!r} pred …{c['pred'][-90:]!r}: "
                      f"Seedbed {s}, Math-Verify {r} ({why})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", help="Math-Verify 0.9.0's tests/ folder (from its source distribution)")
    parser.add_argument("--hedges", action="store_true", help="also the property test's generated hedges and lists")
    parser.add_argument("-v", action="store_true", help="print every difference that is not a listed one")
    args = parser.parse_args()
    print("Seedbed's case table (tests/verifiers/math_peer_cases.py):")
    measure(table_cases(), args.v)
    if args.suite:
        print(f"Math-Verify's own test suite ({args.suite}):")
        measure(suite_cases(args.suite), args.v)
    if args.hedges:
        print("Generated hedges and lists (tests/verifiers/test_math_hedges.py):")
        measure(hedge_cases(), args.v)


if __name__ == "__main__":
    main()
