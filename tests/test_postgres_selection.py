"""Which tests ``./seedbed test`` runs a second time on PostgreSQL: those marked ``postgres`` (and ``django_db``),
the tests whose outcome may depend on the database engine (docs/architecture.md#tests-and-benchmarks). The whole
suite runs on SQLite first; a test of a page, a form, a worker's process handling or a browser gives the same
answer on either database and runs once.

This guard reads the test modules' source (nothing is imported or run): the selection is not empty and holds the
modules of the engine-specific code, and a module that touches the database and uses an engine-specific construct
itself, or calls a service or selector whose own code issues engine-specific SQL, is marked, or is listed in
``SETS_THE_SCENE_ONLY`` with the reason it need not be. It sees direct uses only: a test that reaches such code
through a URL is not seen, and is marked by reading it (the reviewed list is the modules' ``pytestmark`` lines).

A module may mark test by test instead of as a whole: then every one of its tests whose own code (with the module's
helpers and fixtures it reaches) uses such code is marked, a parametrized one on at least one of its cases (the
sample that runs the engine's part again: the other cases vary only what the test computes over the same queries).
Long cases that only repeat the same SQL over other data run once, on SQLite."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
# end-to-end browser tests never run on PostgreSQL (./seedbed test passes --ignore=tests/e2e in that phase)
NOT_IN_THE_POSTGRES_PHASE = ("e2e",)

# Production code whose outcome may differ between SQLite and PostgreSQL: raw SQL and the backend switch, row
# locks (a no-op on SQLite), claims by a conditional UPDATE, constraint races caught as IntegrityError, bulk
# inserts (SQLite's 999-variable batches), LIKE-based and case-insensitive lookups (SQLite folds ASCII only, and
# its LIKE ignores case), JSON key lookups.
ENGINE_SPECIFIC_SQL = re.compile(
    r"select_for_update|\bcursor\b|connection\.vendor|connection\.ops|RawSQL|\.extra\(|\.raw\(|IntegrityError"
    r"|bulk_create|ignore_conflicts|update_conflicts|__i?contains|__iexact|__i?startswith|__i?endswith|has_key"
    r"|Lower\(|Upper\(|\.update\((?:[^()]|\([^()]*\))*\)\s*==\s*1|status=[\w.]+\)\.update\(")
PRODUCTION = ("webapp", "workers")

# What a test module's own code may use that makes its outcome the engine's: the constraint error, the
# connection (raw SQL, vendor checks), threads racing for a row, migrations run forwards and backwards, and the
# modules that are raw SQL or read through it.
OWN_CONSTRUCTS = {"IntegrityError", "DataError", "connection", "connections", "select_for_update", "cursor",
                  "MigrationExecutor", "Thread", "ThreadPoolExecutor", "Barrier", "threading", "multiprocessing"}
ENGINE_MODULES = ("webapp.runs.rollups", "webapp.sweeps.policy_check", "webapp.projects.idempotency")

# Modules that call such code only to set up what they test, which is not the database's answer; each names where
# the code they call is run on PostgreSQL.
SETS_THE_SCENE_ONLY = {
    "tests/slurm/test_slurm_multinode.py": "a real Slurm cluster's 2-node job seen and killed in a browser (its "
                                           "dialog handler, page.once); run_kill's claims run on PostgreSQL in "
                                           "tests/runs",
    "tests/slurm/test_slurm_queue.py": "a real Slurm cluster's batch jobs (what sbatch, squeue and scancel say); "
                                       "run_kill's claims run on PostgreSQL in tests/runs",
    "tests/sweeps/test_runaway_worker.py": "a real worker's sweep of seeds failing at step 0 (how many runs it "
                                          "makes); sweep_stop's claims run on PostgreSQL in tests/sweeps/test_stop.py",
    "tests/api/test_client.py": "the command-line client over HTTP (exit codes, output); the API it calls runs "
                                "on PostgreSQL in tests/api/test_api.py",
    "tests/evals/test_eval_job.py": "a real worker's evaluation (model, checkpoint, pass@k); the job's claims and "
                                    "results run on PostgreSQL in tests/evals/test_services.py",
    "tests/sweeps/test_dashboard_browser.py": "what a browser draws; the dashboard's reads and the policy run on "
                                              "PostgreSQL in tests/sweeps/test_views.py and test_services.py",
    "tests/faults/test_home_disk_full.py": "a SQLite database file on a full filesystem, by nature SQLite's (the "
                                           "cursor only checkpoints its WAL before it is copied there); the "
                                           "services it exercises run on PostgreSQL in their own tests",
    "tests/test_bad_inputs.py": "every case is refused by validation before anything is written (each asserts "
                                "that nothing was created); the services' writes run on PostgreSQL in their own "
                                "tests",
    "tests/test_security.py": "response headers, throttling and allowed hosts; project_create runs on PostgreSQL "
                              "in tests/projects/",
    "tests/workers/test_distributed_runs.py": "torchrun ranks, signals and checkpoints on a real worker; the "
                                              "kill and resume services run on PostgreSQL in tests/runs/",
    "tests/workers/test_engine_trl.py": "TRL's trainer on a real worker; the kill, resume, sweep and evaluation "
                                        "services run on PostgreSQL in tests/runs/, tests/sweeps/, tests/evals/",
    "tests/workers/test_stalled_runs.py": "the stall flag of a real worker's SIGSTOPped run on its page, in the API "
                                          "and the CLI; the step clock's services run on PostgreSQL in "
                                          "tests/runs/test_stall.py",
    "tests/workers/test_train_run.py": "the training process's life on a real worker (folders, checkpoints, "
                                       "signals); the claim, heartbeat and lost-run services run on PostgreSQL "
                                       "in tests/runs/test_services.py and tests/workers/test_sink.py",
}

# The same, test by test, in modules that mark test by test.
TRIALS_RUN_ON_POSTGRES = ("a trial's claim and queue run on PostgreSQL in test_the_worker_side_claims_a_queued_trial_once "
                          "and test_a_second_trial_waits_for_the_first")
TESTS_THAT_SET_THE_SCENE_ONLY = {
    "tests/library/test_model_trials.py::test_a_viewer_sees_the_model_but_no_form_and_a_non_member_gets_404":
        f"who may see and try a model (a page and 403/404s); {TRIALS_RUN_ON_POSTGRES}",
    "tests/library/test_model_trials.py::test_a_model_still_importing_cannot_be_tried":
        f"refused by validation before anything is written; {TRIALS_RUN_ON_POSTGRES}",
    "tests/library/test_model_trials.py::test_a_trial_that_cannot_run_fails_and_says_why":
        f"the model's errors (a prompt too long, no weights); {TRIALS_RUN_ON_POSTGRES}",
    "tests/library/test_model_trials.py::test_smollm2_is_tried_through_its_chat_template":
        f"SmolLM2's chat template and reply; {TRIALS_RUN_ON_POSTGRES}",
}

# The code that is engine-specific is tested in these; they must stay in the selection.
MUST_BE_SELECTED = (
    "tests/runs/test_rollups.py", "tests/runs/test_services.py", "tests/runs/test_search.py",
    "tests/runs/test_dispatch_stamp.py", "tests/sweeps/test_services.py", "tests/sweeps/test_policy_check.py",
    "tests/evals/test_services.py", "tests/api/test_idempotency.py", "tests/projects/test_reserved_names.py",
    "tests/projects/test_migration.py", "tests/sweeps/test_migrations.py", "tests/faults/test_run_folders.py",
    "tests/workers/test_sink.py",
)


def engine_specific_functions() -> set[str]:
    """Public functions of webapp/ and workers/ whose own body, or a private helper of their module that they
    call, matches ``ENGINE_SPECIFIC_SQL`` (migrations left out: their tests are matched by MigrationExecutor), or
    calls such a function or method of the job core (``jobs.claim(...)``, ``RUN_JOB.locked(pk)``: the apps' claims,
    row locks and lost passes are the core's, reached through the apps' own functions)."""
    core = {name for path, name in _engine_specific_functions(_with_core_methods(ENGINE_SPECIFIC_SQL))
            if JOB_CORE in path.parts}
    with_methods = _with_core_methods(ENGINE_SPECIFIC_SQL)
    through_the_core = re.compile(with_methods.pattern + r"|\bjobs\.(?:" + "|".join(sorted(core)) + r")\(")
    return {name for _, name in _engine_specific_functions(through_the_core if core else with_methods)}


JOB_CORE = "jobs"  # webapp/jobs/


def _with_core_methods(pattern: re.Pattern) -> re.Pattern:
    """``pattern``, and a call of a method of the job core's classes matching it (``kind.locked(pk)``)."""
    methods = set()
    for path in (ROOT / "webapp" / JOB_CORE).rglob("*.py"):
        source = path.read_text()
        methods |= {f.name for c in ast.parse(source).body if isinstance(c, ast.ClassDef) for f in c.body
                    if isinstance(f, ast.FunctionDef) and pattern.search(ast.get_source_segment(source, f) or "")}
    return re.compile(pattern.pattern + r"|\.(?:" + "|".join(sorted(methods)) + r")\(") if methods else pattern


def _engine_specific_functions(pattern: re.Pattern) -> set[tuple[Path, str]]:
    """(file, name) of the public functions ``engine_specific_functions`` describes, for ``pattern``; a private
    helper, or any function imported from a sibling module (``from .transitions import locked_run``), counts as the
    module's own."""
    modules = {}
    for top in PRODUCTION:
        for path in (ROOT / top).rglob("*.py"):
            if "migrations" not in path.parts:
                source = path.read_text()
                tree = ast.parse(source)
                defs = {node.name: node for node in tree.body  # module-level: what tests call
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
                imported = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                            for a in node.names if a.name.startswith("_") or node.level > 0}
                hit = {name for name, node in defs.items() if pattern.search(ast.get_source_segment(source, node) or "")}
                modules[path] = (defs, imported, hit)
    private_hits, grown = set(), True
    while grown:  # through private helpers and sibling imports: a public callee of the same module is selected on its own
        grown = False
        for defs, imported, hit in modules.values():
            known = hit | (imported & private_hits)
            for name, node in defs.items():
                calls = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call)
                         and isinstance(c.func, ast.Name) and (c.func.id.startswith("_") or c.func.id in imported)}
                if name not in hit and calls & known:
                    hit.add(name)
                    grown = True
            new = set(hit) - private_hits
            if new:
                private_hits |= new
                grown = True
    return {(path, name) for path, (_, _, hit) in modules.items() for name in hit if not name.startswith("_")}


class Module:
    """One test module's source, read for what it marks, what it touches and what it calls."""

    def __init__(self, path: Path):
        self.name = str(path.relative_to(ROOT))
        self.source = path.read_text()
        self.tree = ast.parse(self.source)

    def _segment(self, node) -> str:
        return ast.get_source_segment(self.source, node) or ""

    @property
    def marked(self) -> bool:
        """``postgres`` in the module's ``pytestmark`` or on one of its tests."""
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
                if "mark.postgres" in self._segment(node):
                    return True
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if any("mark.postgres" in self._segment(d) for d in node.decorator_list):
                    return True
        return False

    @property
    def touches_the_database(self) -> bool:
        params = {a.arg for node in ast.walk(self.tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  for a in node.args.args}
        return "django_db" in self.source or bool(params & {"db", "transactional_db"})

    def names(self) -> set[str]:
        """Every attribute, name and imported name the module refers to."""
        names = set()
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.ImportFrom):
                names |= {a.name for a in node.names}
                names |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
        return names

    def reasons(self, functions: set[str]) -> list[str]:
        names = self.names()
        return sorted((names & OWN_CONSTRUCTS) | (names & set(ENGINE_MODULES)) | (names & functions))

    @property
    def marked_whole(self) -> bool:
        """``postgres`` in the module's ``pytestmark``: every test of the module is selected."""
        return any(isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets)
                   and "mark.postgres" in self._segment(node) for node in self.tree.body)

    def tests(self) -> list[ast.FunctionDef]:
        """The module's test functions, and those of its test classes."""
        found = []
        for node in self.tree.body:
            inside = node.body if isinstance(node, ast.ClassDef) and node.name.startswith("Test") else [node]
            found += [n for n in inside if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.name.startswith("test")]
        return found

    def test_marked(self, test: ast.FunctionDef) -> bool:
        """``postgres`` on the test, or on one case of its parametrization (``pytest.param(..., marks=...)``)."""
        return any("mark.postgres" in self._segment(d) for d in test.decorator_list)

    def test_reasons(self, test: ast.FunctionDef, functions: set[str]) -> list[str]:
        """What makes this test's outcome the engine's: the engine-specific names its own code, and the module's
        helpers, classes and fixtures it reaches, refer to (an engine module counts through its import alias)."""
        helpers = {n.name: n for n in self.tree.body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n not in self.tests()}
        aliases = {}
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom):
                aliases |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                aliases |= {a.asname or a.name: a.name for a in node.names}
        reached, todo = [test], [test]
        while todo:  # the test, its fixtures (by argument name) and the helpers they call, transitively
            node = todo.pop()
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                used |= {a.arg for a in node.args.args}
            for name in used:
                if name in helpers and helpers[name] not in reached:
                    reached.append(helpers[name])
                    todo.append(helpers[name])
        names = set()
        for node in reached:
            for n in ast.walk(node):
                if isinstance(n, ast.Attribute):
                    names.add(n.attr)
                elif isinstance(n, ast.Name):
                    names |= {n.id, aliases.get(n.id, n.id)}
        return sorted((names & OWN_CONSTRUCTS) | (names & set(ENGINE_MODULES)) | (names & functions))


def modules_in_the_postgres_phase() -> list[Module]:
    return [Module(path) for path in sorted(TESTS.rglob("test_*.py"))
            if not set(path.relative_to(TESTS).parts[:-1]) & set(NOT_IN_THE_POSTGRES_PHASE)]


def test_the_postgres_selection_holds_the_engine_specific_modules():
    modules = {m.name: m for m in modules_in_the_postgres_phase()}
    selected = {name for name, m in modules.items() if m.marked}
    missing = [name for name in MUST_BE_SELECTED if name not in selected]
    assert len(selected) >= len(MUST_BE_SELECTED) and not missing, f"not marked postgres: {missing}"
    outside = sorted(name for name in selected if not modules[name].touches_the_database)
    assert not outside, f"marked postgres but never touch the database (the phase selects django_db): {outside}"


def test_every_module_using_engine_specific_code_is_marked_or_says_why_not():
    functions = engine_specific_functions()
    # the list is computed, not written: it must find the claims, the raw SQL and the constraint races
    assert {"run_start", "run_metrics_append", "runs_mark_lost", "eval_start", "sweep_fill_slots",
            "rebuild_run", "model_try", "project_create", "run_search"} <= functions, sorted(functions)
    unmarked = {}
    for module in modules_in_the_postgres_phase():
        if module.marked or not module.touches_the_database:
            continue
        why = module.reasons(functions)
        if why and module.name not in SETS_THE_SCENE_ONLY:
            unmarked[module.name] = why
    assert not unmarked, ("these modules touch the database and use engine-specific code: mark them "
                          f"pytest.mark.postgres, or list them in SETS_THE_SCENE_ONLY with why: {unmarked}")
    stale = sorted(name for name in SETS_THE_SCENE_ONLY if not (ROOT / name).exists() or Module(ROOT / name).marked
                   or not Module(ROOT / name).reasons(functions))
    assert not stale, f"SETS_THE_SCENE_ONLY lists modules that are gone, now marked, or need no reason: {stale}"


def test_a_module_marking_test_by_test_marks_every_test_using_engine_specific_code():
    functions = engine_specific_functions()
    per_test = [m for m in modules_in_the_postgres_phase()
                if m.touches_the_database and m.marked and not m.marked_whole and m.name not in SETS_THE_SCENE_ONLY]
    # the selection's own samples are judged here: the policy check's random replays run on PostgreSQL in two cases
    assert "tests/sweeps/test_policy_check.py" in {m.name for m in per_test}
    unmarked, needless = {}, []
    for m in per_test:
        for test in m.tests():
            name, why = f"{m.name}::{test.name}", m.test_reasons(test, functions)
            if name in TESTS_THAT_SET_THE_SCENE_ONLY:
                if m.test_marked(test) or not why:
                    needless.append(name)
            elif why and not m.test_marked(test):
                unmarked[name] = why
    assert not unmarked, ("these tests use engine-specific code in a module that marks test by test: mark them "
                          "pytest.mark.postgres (a parametrized one on one of its cases at least), or list them in "
                          f"TESTS_THAT_SET_THE_SCENE_ONLY with why: {unmarked}")
    gone = sorted(name for name in TESTS_THAT_SET_THE_SCENE_ONLY if not any(
        f"{m.name}::{t.name}" == name for m in per_test for t in m.tests()))
    assert not needless and not gone, (f"TESTS_THAT_SET_THE_SCENE_ONLY lists tests now marked or needing no reason "
                                       f"{needless}, or gone or no longer in a module marking test by test {gone}")
