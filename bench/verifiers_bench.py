"""Verifier throughput: math verifications/s (1 and 2 worker processes) and sandboxed code executions/s
(a trivial passing program and a 10-assert test; sequential and with 2 fork servers; each execution is a
program process and a test process, and the CPU time they, their server and the caller use is given too).

    python bench/verifiers_bench.py [--math-n 4000] [--complex-n 400] [--lenient-n 400] [--code-n 300]
                                    [--ifeval-n 2000] [--readers-n 164] [--only math|code|ifeval|sandbox|readers]

Math runs on a realistic mix (60 % integer answers, 25 % fractions/decimals/percentages, 15 % complex LaTeX
that needs math-verify), in groups of 8 completions sharing a gold as in GRPO, and on complex LaTeX alone;
then the same mix in mode lenient (every completion through math-verify, as a pass@k evaluation reads it).
Every (gold, answer) pair is distinct and the result cache is off, so each figure counts real work. Targets on
a 2-core machine: >= 500 math verifications/s across 2 processes, >= 100 sandboxed executions/s. The machine
may be shared: the load average is printed, and each math line gives CPU time per verification too.
ifeval: constraint checks/s in one process on IFEval-like examples, one check in 8 a language check (langdetect).
sandbox: this checkout's sandbox server against the one of BASELINE_COMMIT (extracted with ``git archive``), timed
in alternating slices of the same programs, sequential, one server each: executions/s and CPU-ms each (target:
no slower). readers: the task-blind test reader (tests/verifiers/reads_the_tests.py) on both servers, every
HumanEval problem in both forms (target: 0 now).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from training.verifiers import VerifierError, get_verifier, score_batch  # noqa: E402


GROUP = 8  # completions per prompt, as in GRPO: the G answers of a group share one gold


def _integer_pair(i: int) -> tuple[str, str, float]:
    """GSM8K/AIME style: right, wrong, or right with thousands separators."""
    gold = 1000 + i // GROUP
    answer, expected = [(f"{gold:,}", 1.0), (str(gold + 1), 0.0), (str(gold), 1.0),
                        (f"{gold:,}".replace(",", "{,}"), 1.0), (f"0{gold}", 1.0), (str(gold - 1), 0.0),
                        (f"+{gold}", 1.0), (str(10 * gold), 0.0)][i % GROUP]
    return str(gold), answer, expected


def _number_pair(i: int) -> tuple[str, str, float]:
    """Fractions, decimals and percentages: one gold per group, answers right or wrong in several notations."""
    group, j = divmod(i, GROUP)
    d = (4, 5, 8, 20, 25)[group % 5]
    k = (group // 5) * d + 1 + group % (d - 1)  # k/d in lowest terms for d = 4, 5, 8, 20, 25 when k % 2, k % 5
    value = k / d
    if group % 3 == 0:  # a fraction gold
        gold = rf"\frac{{{k}}}{{{d}}}"
        answers = [(rf"\dfrac{{{k}}}{{{d}}}", 1.0), (f"{k}/{d}", 1.0), (f"{value:g}", 1.0),
                   (rf"\frac{{{2 * k}}}{{{2 * d}}}", 1.0), (f"{k + 1}/{d}", 0.0), (f"{value + 0.1:g}", 0.0),
                   (rf"-\frac{{{k}}}{{{d}}}", 0.0), (f"{100 * value:g}%", 1.0)]
    elif group % 3 == 1:  # a decimal gold
        gold = f"{value:g}"
        answers = [(rf"\frac{{{k}}}{{{d}}}", 1.0), (f"{value:.4f}", 1.0), (f"{k}/{d}", 1.0), (f"{value * 10:g}", 0.0),
                   (f"{value + 1:g}", 0.0), (rf"\tfrac{{{k}}}{{{d}}}", 1.0), (f"-{value:g}", 0.0),
                   (f"{value:g}" + ("0" if "." in f"{value:g}" else ".0"), 1.0)]
    else:  # a percentage gold
        p = group // 3 % 100 + 1
        gold = rf"{p}\%"
        answers = [(f"{p}", 1.0), (f"{p / 100:g}", 1.0), (f"{p}%", 1.0), (rf"\frac{{{p}}}{{100}}", 1.0),
                   (rf"{p + 1}\%", 0.0), (f"{p + 1}", 0.0), (f"{p / 10:g}", 0.0), (f"{p:d}.0%", 1.0)]
    answer, expected = answers[j]
    return gold, answer, expected


def _complex_pair(i: int) -> tuple[str, str, float]:
    """Shapes outside the fast path (pi, polynomials, intervals, sets, radical sums): one gold per group,
    its GROUP answers right or wrong in different notations, as a model's samples would be."""
    group, j = divmod(i, GROUP)
    k = group // 5 + 2
    sq = k * k
    groups = [
        (rf"\frac{{\pi}}{{{k}}}", [(rf"\pi/{k}", 1.0), (rf"\frac{{\pi}}{{{k}}}", 1.0), (rf"\frac{{1}}{{{k}}}\pi", 1.0),
                                  (rf"\frac{{\pi}}{{{k + 1}}}", 0.0), (rf"\frac{{2\pi}}{{{2 * k}}}", 1.0),
                                  (rf"{k}\pi", 0.0), (rf"\dfrac{{\pi}}{{{k}}}", 1.0), (rf"\pi^{k}", 0.0)]),
        (f"(x+{k})^2", [(f"x^2+{2 * k}x+{sq}", 1.0), (f"(x+{k})^2", 1.0), (f"({k}+x)^2", 1.0), (f"x^2+{sq}", 0.0),
                        (f"(x-{k})^2", 0.0), (f"x^2+{2 * k}x+{sq + 1}", 0.0), (f"(x+{k})(x+{k})", 1.0),
                        (f"x^2+{k}x+{sq}", 0.0)]),
        (f"[{k}, {k + 2})", [(f"[{k},{k + 2})", 1.0), (f"({k},{k + 2})", 0.0), (f"[{k},{k + 2}]", 0.0),
                              (f"[{k}, {k + 2})", 1.0), (f"[{k},{k + 3})", 0.0), (f"({k}, {k + 2}]", 0.0),
                              (rf"\left[{k}, {k + 2}\right)", 1.0), (f"[{k + 1},{k + 2})", 0.0)]),
        (rf"\{{{k}, {k + 1}\}}", [(rf"\{{{k + 1}, {k}\}}", 1.0), (rf"\{{{k}, {k + 1}\}}", 1.0), (f"{k}, {k + 1}", 1.0),
                                   (f"{k + 1}, {k}", 1.0), (rf"\{{{k}, {k + 2}\}}", 0.0), (rf"\{{{k}\}}", 0.0),
                                   (rf"\{{{k}, {k + 1}, {k + 2}\}}", 0.0), (rf"\{{{k},{k + 1}\}}", 1.0)]),
        (rf"{k}\sqrt{{2}}+1", [(rf"1+{k}\sqrt{{2}}", 1.0), (rf"{k}\sqrt{{2}}+1", 1.0), (rf"\sqrt{{{2 * sq}}}+1", 1.0),
                               (rf"{k}\sqrt{{3}}+1", 0.0), (rf"{k}\sqrt{{2}}-1", 0.0), (rf"1+\sqrt{{2}}\cdot {k}", 1.0),
                               (rf"({k}+1)\sqrt{{2}}", 0.0), (rf"{k}\sqrt{{2}}+2", 0.0)]),
    ]
    gold, answers = groups[group % len(groups)]
    answer, expected = answers[j]
    return gold, answer, expected


def math_items(n: int, mix: tuple[float, float, float]) -> list[tuple[str, dict, float, str]]:
    """n distinct (completion, example, expected score, kind) items in groups of GROUP sharing a gold.

    ``mix``: the shares of integer answers, fraction/decimal/percent answers and complex LaTeX answers
    (the last need math-verify). Shares are exact over every 20 groups.
    """
    items = []
    counters = {"integer": 0, "number": 0, "complex": 0}
    makers = {"integer": _integer_pair, "number": _number_pair, "complex": _complex_pair}
    for g in range(max(1, n // GROUP)):
        slot = g % 20  # kinds interleaved in cycles of 20 groups, as in a shuffled dataset
        kind = "integer" if slot < mix[0] * 20 else ("number" if slot < (mix[0] + mix[1]) * 20 else "complex")
        for _ in range(GROUP):
            gold, answer, expected = makers[kind](counters[kind])
            counters[kind] += 1
            items.append((f"Reasoning... so the answer is \\boxed{{{answer}}}.", {"answer": gold}, expected, kind))
    return items


def _cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds used so far by these processes (Linux /proc; 0.0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except (OSError, IndexError, ValueError):
            pass
    return total


def bench_math(n: int, processes: int, mix: tuple[float, float, float],
               mode: str = "strict") -> tuple[float, float, float]:
    """Verifications/s over ``math_items(n, mix)`` (result cache off), the share decided in-process, and the
    CPU seconds per verification of the parent and its workers together (a figure other load does not
    change much: ``processes / cpu`` bounds the rate on that many otherwise idle cores). ``mode`` lenient
    hands every whole completion to Math-Verify's own extraction (pass@k of a base model): no fast path."""
    v = get_verifier("math", mode=mode, processes=processes, cache_size=0)
    # Start the workers and warm them outside the timing (ANTLR fills its parse caches on first use of each
    # shape, as long-lived training workers already have): complex pairs with other values than the timed ones.
    warm = [_complex_pair(i) for i in range(10**6, 10**6 + 80 * processes)]
    score_batch(v, [rf"\boxed{{{a}}}" for _, a, _ in warm], [{"answer": g} for g, _, _ in warm])
    items = math_items(n, mix)
    workers = [w.proc.pid for w in v.pool._workers]
    cpu_before = time.process_time() + _cpu_seconds(workers)
    start = time.perf_counter()
    out = score_batch(v, [c for c, _, _, _ in items], [e for _, e, _, _ in items])
    elapsed = time.perf_counter() - start
    cpu = time.process_time() + _cpu_seconds(workers) - cpu_before
    errors = [o for o in out if isinstance(o, VerifierError)]
    wrong = [(item, o.details) for item, o in zip(items, out) if not isinstance(o, VerifierError)
             and o.score != item[2]]
    assert not errors and not wrong, (errors[:2], wrong[:2])
    # strict: every complex item really went to math-verify, every other one was decided in the parent
    assert all(o.details["fast_path"] == (item[3] != "complex" and mode == "strict")
               for item, o in zip(items, out)), "fast-path split"
    fast_share = sum(o.details["fast_path"] for o in out) / len(out)
    return len(items) / elapsed, fast_share, cpu / len(items)


def _tree_cpu_seconds(pids: list[int]) -> float:
    """User + system CPU seconds of these processes, their live descendants and every child they reaped
    (a sandbox server's program and test processes are reaped children: cutime, cstime)."""
    total, seen, todo = 0.0, set(), list(pids)
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += sum(int(v) for v in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except (OSError, IndexError, ValueError):
            pass
    return total


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
    servers = [w.proc.pid for w in v.sandbox.pool._workers]
    cpu_before = time.process_time() + _tree_cpu_seconds(servers)
    start = time.perf_counter()
    if sequential:  # one call after the other, as a simple caller would
        out = [v(c, e) for c, e in items]
    else:
        out = score_batch(v, [c for c, _ in items], [e for _, e in items])
    elapsed = time.perf_counter() - start
    cpu = time.process_time() + _tree_cpu_seconds(servers) - cpu_before
    bad = [o for o in out if isinstance(o, VerifierError) or o.score != 1.0]
    assert not bad, bad[:2]
    return n / elapsed, out[0].details["layers"], cpu / n


BASELINE_COMMIT = "b1d04b3"  # the sandbox server before the zygote and the tests' own uid


def baseline_server_dir(commit: str = BASELINE_COMMIT) -> str:
    """``training/verifiers/sandbox_server/`` as it was at ``commit``, extracted from git into a temp folder."""
    import subprocess
    import tempfile
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    folder = tempfile.mkdtemp(prefix="seedbed-baseline-server-")
    archive = subprocess.run(["git", "-C", repo, "archive", commit, "training/verifiers/sandbox_server"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
    os.chmod(folder, 0o755)  # bound read-only inside bubblewrap, read by the server as root or not
    return os.path.join(folder, "training", "verifiers", "sandbox_server")


def _verifier_on(server_dir: str | None, processes: int = 1, partial_credit: bool = False):
    """A code verifier (cache off) whose sandbox runs the server in ``server_dir`` (None: this checkout's).
    The baseline takes ``UID GID MODE [TMP_MB]``; this checkout's takes the tests' ids too."""
    from training.verifiers.code import CodeVerifier
    from training.verifiers.sandbox import (_SERVER_IN_SANDBOX, Sandbox, SandboxServerProcess, _python_paths,
                                            bwrap_command)
    from training.verifiers.workers import WorkerPool

    class BaselineServer(SandboxServerProcess):
        @staticmethod
        def command(uid, gid, tests_ids, use_bwrap, tmp_mb, cgroup=None):  # (the baseline takes no cgroup)
            python, prefix = _python_paths()
            if use_bwrap:
                return bwrap_command(python, prefix, tmp_mb, server_dir=server_dir) + [
                    python, "-I", _SERVER_IN_SANDBOX, str(uid), str(gid), "bwrap", str(tmp_mb)]
            return [python, "-I", server_dir, str(uid), str(gid), "host"]

    v = CodeVerifier(processes=processes, cache_size=0, timeout_s=5, partial_credit=partial_credit)
    if server_dir is not None:
        sandbox = Sandbox(processes=processes, max_wall_s=35.0, tmp_mb=v.tmp_mb)
        sandbox.pool.close()
        sandbox.pool = WorkerPool("sandbox", processes=processes, deadline_s=35.0, worker_factory=lambda: (
            BaselineServer(sandbox.uid, sandbox.gid, sandbox.use_bwrap, v.tmp_mb, sandbox.tests_ids)))
        v.sandbox = sandbox
    v("```python\nx = 1\n```", {"tests": "assert x == 1"})  # servers started outside the timing
    return v


def bench_code_against_baseline(n: int, rounds: int = 10, processes: int = 1) -> dict:
    """Sandboxed executions/s and CPU-ms each of the baseline server and this checkout's, timed alternately
    (``rounds`` slices of n / rounds executions each, on the same programs), so that other load on the machine
    weighs on both alike: one call after the other with 1 server, a batch per slice with more. Programs:
    ``code_items`` (the 10-assert test and the trivial one, mixed)."""
    verifiers = {"baseline": _verifier_on(baseline_server_dir(), processes), "now": _verifier_on(None, processes)}
    items = [item for pair in zip(code_items(n // 2, False), code_items(n - n // 2, True)) for item in pair]
    totals = {name: [0.0, 0.0, 0] for name in verifiers}  # wall s, CPU s, executions
    per_round = max(1, len(items) // rounds)
    for r in range(0, len(items), per_round):
        chunk = items[r:r + per_round]
        for name in (("baseline", "now") if (r // per_round) % 2 == 0 else ("now", "baseline")):
            v = verifiers[name]
            servers = [w.proc.pid for w in v.sandbox.pool._workers]
            cpu_before = time.process_time() + _tree_cpu_seconds(servers)
            start = time.perf_counter()
            if processes == 1:
                out = [v(c, e) for c, e in chunk]
            else:
                out = score_batch(v, [c for c, _ in chunk], [e for _, e in chunk])
            totals[name][0] += time.perf_counter() - start
            totals[name][1] += time.process_time() + _tree_cpu_seconds(servers) - cpu_before
            totals[name][2] += len(chunk)
            assert all(o.score == 1.0 for o in out), (name, [o.details for o in out if o.score != 1.0][:2])
    for v in verifiers.values():
        v.sandbox.close()
    return {name: {"rate": k / wall, "cpu_ms": 1e3 * cpu / k, "n": k} for name, (wall, cpu, k) in totals.items()}


def bench_readers(n: int) -> dict:
    """The task-blind test reader (tests/verifiers/reads_the_tests.py, every vector) against the baseline server
    and this checkout's, on HumanEval's first ``n`` problems in both forms (their own ``check(candidate)`` and
    the built-in task), each reader's run right after a run of the same problem's own-form tests on the same
    server. Per server and form: problems passed whole, and problems where the reader passed more checks than
    the same program with an empty table (partial credit on)."""
    from tests.verifiers.reads_the_tests import program
    from training.benchmarks import humaneval_examples, humaneval_problems
    own = [{"task_id": p["task_id"], "setup_code": p["prompt"], "entry_point": p["entry_point"],
            "tests": p["test"] + f"\ncheck({p['entry_point']})\n"} for p in humaneval_problems()][:n]
    forms = {"own form": own, "built-in task": humaneval_examples()[:n]}
    out = {}
    for name, server_dir in (("baseline", baseline_server_dir()), ("now", None)):
        v = _verifier_on(server_dir, partial_credit=True)
        for form, examples in forms.items():
            blind = v.batch([program(())] * len(examples), examples)
            none = [f"```python\n{e['setup_code']}    return None\n```" for e in own]
            pairs = v.batch([c for pair in zip(none, [program()] * len(examples)) for c in pair],
                            [e for pair in zip(own, examples) for e in pair])
            read = pairs[1::2]
            bad = [r for r in blind + read if isinstance(r, VerifierError)]
            assert not bad, bad[:2]
            out[(name, form)] = (sum(r.score == 1.0 for r in read),
                                 sum(r.details["passed"] > b.details["passed"] for r, b in zip(read, blind)))
        v.sandbox.close()
    return out


_IFEVAL_TEXTS = {
    "en": "The river runs through the old town and past the mill. Children play on its banks every summer, and the "
          "fishermen wait there at dawn for the first light.",
    "fr": "La rivière traverse la vieille ville et passe devant le moulin. Les enfants jouent sur ses rives chaque "
          "été, et les pêcheurs y attendent la première lumière.",
    "de": "Der Fluss fließt durch die Altstadt und an der Mühle vorbei. Kinder spielen jeden Sommer an seinen "
          "Ufern, und die Fischer warten dort auf das erste Licht.",
    "es": "El río atraviesa el casco antiguo y pasa junto al molino. Los niños juegan en sus orillas cada verano, y "
          "los pescadores esperan allí la primera luz.",
    "ru": "Река течёт через старый город мимо мельницы. Дети играют на её берегах каждое лето, а рыбаки ждут там "
          "первого света.",
}
# IFEval-like constraints; one check in 8 is a language check (langdetect), as in IFEval's mix of response
# language and English-only case instructions
_IFEVAL_CONSTRAINTS = [
    {"type": "word_count", "min": 120}, {"type": "sentence_count", "max": 20}, {"type": "language", "language": "en"},
    {"type": "keywords_include", "keywords": ["river", "mill"]}, {"type": "paragraph_count", "exact": 4},
    {"type": "highlighted_sections", "min": 2}, {"type": "no_commas"}, {"type": "language", "language": "fr"},
    {"type": "keywords_exclude", "keywords": ["castle", "king"]}, {"type": "capital_words", "max": 5},
    {"type": "postscript", "marker": "P.S."}, {"type": "sections", "marker": "SECTION", "min": 2},
    {"type": "bullet_count", "exact": 3}, {"type": "keyword_frequency", "keyword": "light", "min": 2},
    {"type": "lowercase"}, {"type": "title"},
]


def ifeval_items(n: int) -> list[tuple[str, dict]]:
    """n distinct (response, example) pairs: 4 paragraphs (about 110 words) in one of 5 languages with markdown
    (a title, highlights, bullets, a postscript), each example 3 constraints from ``_IFEVAL_CONSTRAINTS``."""
    languages = sorted(_IFEVAL_TEXTS)
    items = []
    for i in range(n):
        text = _IFEVAL_TEXTS[languages[i % len(languages)]]
        response = (f"<<Note {i}>>\n\nSECTION 1\n{text} *Item {i}* is **{i % 7}**.\n\n* one\n* two {i}\n* three\n\n"
                    f"SECTION 2\n{text}\n\nP.S. {i}")
        picked = [_IFEVAL_CONSTRAINTS[(3 * i + k) % len(_IFEVAL_CONSTRAINTS)] for k in range(3)]
        items.append((response, {"constraints": picked}))
    return items


def bench_ifeval(n: int) -> tuple[float, float, float]:
    """Constraint checks/s over ``ifeval_items(n)`` in one process (the verifier runs in the caller), the share
    of language checks among them, and the language checks/s alone."""
    v = get_verifier("ifeval")
    v("warm up langdetect's profiles", {"constraints": [{"type": "language", "language": "en"}]})  # once a process
    items = ifeval_items(n)
    start = time.perf_counter()
    out = [v(r, e) for r, e in items]
    elapsed = time.perf_counter() - start
    checks = sum(o.details["total"] for o in out)
    share = sum(c["type"] == "language" for _, e in items for c in e["constraints"]) / checks
    only = [(r, {"constraints": [{"type": "language", "language": "en"}]}) for r, _ in items[:max(1, n // 4)]]
    start = time.perf_counter()
    for r, e in only:
        v(r, e)
    return checks / elapsed, share, len(only) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--math-n", type=int, default=4000)
    parser.add_argument("--complex-n", type=int, default=400)
    parser.add_argument("--lenient-n", type=int, default=400)
    parser.add_argument("--only", choices=("math", "code", "ifeval", "sandbox", "readers"), default=None,
                        help="run one part only (sandbox: this checkout's sandbox server against the baseline's; "
                             "readers: the test reader against both)")
    parser.add_argument("--readers-n", type=int, default=164, help="HumanEval problems for the test reader")
    parser.add_argument("--ifeval-n", type=int, default=2000)
    parser.add_argument("--code-n", type=int, default=300)
    args = parser.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, python {sys.version.split()[0]}")
    try:
        load = os.getloadavg()[0]
        print(f"load average (1 min): {load:.1f}  (figures scale down with other work on the machine)")
    except OSError:
        pass
    realistic, complex_only = (0.60, 0.25, 0.15), (0.0, 0.0, 1.0)
    for label, n, mix in (("mix 60% int/25% frac-dec-pct/15% complex", args.math_n, realistic),
                          ("complex LaTeX only (math-verify)", args.complex_n, complex_only)):
        for processes in (1, 2) if args.only in (None, "math") else ():
            rate, fast, cpu = bench_math(n, processes, mix)
            print(f"math  {label:41s} {processes} process(es): {rate:7.1f} verifications/s  (n={n}, "
                  f"{fast:.0%} in-process, {cpu * 1e3:.2f} CPU-ms each: <= {processes / cpu:.0f}/s "
                  f"on {processes} idle core(s))")
    if args.only in (None, "math"):  # mode lenient: the whole completion to Math-Verify (pass@k evaluations)
        rate, _, cpu = bench_math(args.lenient_n, 2, realistic, mode="lenient")
        print(f"math  {'mode lenient, the same mix':41s} 2 process(es): {rate:7.1f} verifications/s  "
              f"(n={args.lenient_n}, all through math-verify, {cpu * 1e3:.2f} CPU-ms each)")
    if args.only in (None, "ifeval"):
        rate, share, language_rate = bench_ifeval(args.ifeval_n)
        print(f"ifeval 3 constraints per example, {share:.1%} language checks, 1 process: {rate:7.1f} constraint "
              f"checks/s  (n={args.ifeval_n}; language checks alone: {language_rate:.0f}/s)")
    if args.only in ("math", "ifeval"):
        return
    for processes, mode in ((1, "sequential, 1 server"), (2, "batch, 2 servers")) if args.only in (
            None, "code", "sandbox") else ():
        figures = bench_code_against_baseline(args.code_n, processes=processes)
        base, now = figures["baseline"], figures["now"]
        for name, f in (("baseline " + BASELINE_COMMIT, base), ("this checkout", now)):
            print(f"code  sandbox server {name:22s}: {f['rate']:8.1f} executions/s  (n={f['n']}, {mode}, "
                  f"alternating slices; {f['cpu_ms']:.2f} CPU-ms each)")
        print(f"code  this checkout / baseline, {mode}: {now['rate'] / base['rate']:.2f}x executions/s, "
              f"{now['cpu_ms'] / base['cpu_ms']:.2f}x CPU-ms each")
    if args.only in (None, "readers"):
        for (server, form), (whole, gained) in bench_readers(args.readers_n).items():
            print(f"code  test reader on {server:8s} {form:13s}: {whole:3d} of {args.readers_n} problems passed whole, "
                  f"{gained:3d} with more checks passed than without reading")
    if args.only in ("sandbox", "readers"):
        return
    layers = None
    for ten, label in ((False, "trivial program"), (True, "10-assert test")):
        for sequential, processes, mode in ((True, 1, "sequential, 1 server"), (False, 2, "batch, 2 servers")):
            rate, layers, cpu = bench_code(args.code_n, processes, ten, sequential)
            print(f"code  {label:16s} {mode:22s}: {rate:8.1f} executions/s  (n={args.code_n}, {cpu * 1e3:.2f} "
                  f"CPU-ms each, the caller's and the sandbox's: <= {2 / cpu:.0f}/s on 2 idle cores)")
    print(f"sandbox layers: {layers}")


if __name__ == "__main__":
    main()
