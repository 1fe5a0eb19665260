"""The command-line client (``python -m seedbed_client``) run as a real subprocess against a live server: it
launches, lists, reads, kills and watches runs, launches sweeps, manages projects, and reports every failure as
``error: ...`` lines with the documented exit code (2 bad input, 3 token refused, 4 not found/forbidden/conflict,
5 unreachable) and no traceback. No worker runs: runs stay queued until a test moves them with the services."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest
import yaml

from tests.conftest import REPO, as_from_a_terminal, wait_for
from webapp.projects.models import Membership
from webapp.runs import services as run_services
from webapp.runs.models import Run, RunStatus
from webapp.sweeps.models import Sweep

pytestmark = pytest.mark.django_db(transaction=True)

CLIENT_TIMEOUT_S = 30


def _user_with_token(django_user_model, username: str):
    from webapp.api.services import token_create

    user = django_user_model.objects.create_user(username=username, password="pw-for-tests-only")
    return user, token_create(user=user, name="cli tests")[1]


@pytest.fixture
def alice(django_user_model):
    from webapp.projects.services import project_create

    user, token = _user_with_token(django_user_model, "alice")
    project_create(user=user, name="vision")
    return user, token


@pytest.fixture
def bob(django_user_model):
    return _user_with_token(django_user_model, "bob")


@pytest.fixture
def config(model_dir):
    # device cuda: these runs go to the gpu queue, which no test worker consumes (the session's CPU worker, if
    # an earlier test started it, would take them and fail them on the fake model folder); the tests move them
    # through the services themselves
    return {"preset": "grpo", "model_path": model_dir, "total_steps": 6, "prompts_per_step": 4, "group_size": 4,
            "device": "cuda"}


@pytest.fixture
def config_file(tmp_path, config):
    """Writes a config (by default the valid one) to a YAML file and returns its path."""
    def write(data=None, *, text: str | None = None, name: str = "config.yaml") -> str:
        path = tmp_path / name
        path.write_text(text if text is not None else yaml.safe_dump(data if data is not None else config))
        return str(path)
    return write


def client_env(url: str | None, token: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("SEEDBED_URL", "SEEDBED_TOKEN")}
    env.update({"SEEDBED_URL": url} if url is not None else {})
    env.update({"SEEDBED_TOKEN": token} if token is not None else {})
    return env


def client_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "seedbed_client", *args]


@pytest.fixture
def cli(live_server, alice):
    """Run the client once as alice (or as ``token``/``url``) and return the finished process."""
    def run(*args: str, token: str | None = alice[1], url: str | None = live_server.url):
        return subprocess.run(client_argv(*args), cwd=REPO, env=client_env(url, token), capture_output=True,
                              text=True, timeout=CLIENT_TIMEOUT_S)
    return run


def assert_failed(result, code: int, *expected: str) -> list[str]:
    """The process exited with ``code``, printed only ``error: ...`` lines on stderr, each text among them."""
    lines = result.stderr.strip().splitlines()
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert lines and all(line.startswith("error: ") for line in lines), result.stderr
    assert "Traceback" not in result.stderr
    for text in expected:
        assert text in result.stderr, (text, result.stderr)
    return lines


def launched_id(result) -> int:
    assert result.returncode == 0, result.stderr
    match = re.fullmatch(r"run (\d+) queued in project \S+", result.stdout.strip())
    assert match, result.stdout
    return int(match.group(1))


# --- runs ---------------------------------------------------------------------------------------------------------

def test_launch_list_get_and_kill(cli, config_file, config):
    run_id = launched_id(cli("runs", "launch", config_file(), "--project", "vision", "--name", "first"))
    other_id = launched_id(cli("runs", "launch", config_file(), "--name", "second"))
    run = Run.objects.get(pk=run_id)
    assert (run.name, run.project.name, run.status, run.config["total_steps"]) == ("first", "vision", "queued", 6)
    assert Run.objects.get(pk=other_id).project.name == "alice"  # no --project: the personal one

    listed = cli("runs", "list", "--project", "vision")
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.strip().splitlines()
    assert header.split() == ["ID", "NAME", "PROJECT", "STATUS", "STEP"]
    assert [row.split() for row in rows] == [[str(run_id), "first", "vision", "queued", "0/6"]]

    got = cli("runs", "get", str(run_id))
    assert got.returncode == 0, got.stderr
    detail = json.loads(got.stdout)
    assert (detail["id"], detail["status"], detail["config"]["model_path"]) == (run_id, "queued", config["model_path"])

    killed = cli("runs", "kill", str(run_id), "--reason", "wrong lr")
    assert killed.returncode == 0 and killed.stdout.strip() == f"run {run_id} killed", (killed.stdout, killed.stderr)
    assert Run.objects.get(pk=run_id).kill_reason == "wrong lr"
    assert cli("runs", "list", "--status", "killed").stdout.count("\n") == 2  # header and the one killed run
    again = cli("runs", "kill", str(run_id))
    assert_failed(again, 4, "already ended", "only a queued or running run")

    resumed = cli("runs", "resume", str(run_id))
    assert resumed.returncode == 0 and resumed.stdout.strip() == f"run {run_id} queued", resumed.stderr
    assert Run.objects.get(pk=run_id).status == RunStatus.QUEUED
    assert_failed(cli("runs", "resume", str(run_id)), 4, "only a killed, lost or failed run can be resumed")


def test_runs_list_cuts_a_long_name_and_wide_shows_it_whole(cli, alice, config):
    from webapp.projects.models import Project

    long_name = "lr sweep on basic arithmetic with two-term sums, group 8, kl 0.001, seed " + "7" * 30
    run = Run.objects.create(project=Project.objects.get(name="alice"), config=config, name=long_name, seed=0)
    listed = cli("runs", "list")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.strip().splitlines()
    assert long_name not in row and long_name[:39] + "…" in row  # one line, its NAME column 40 characters
    assert row.split()[-3:] == ["alice", "queued", "0/6"] and len(row) < 90
    assert header.index("PROJECT") == row.index("alice")  # the columns stay aligned after the cut
    wide = cli("runs", "list", "--wide")
    assert wide.returncode == 0 and long_name in wide.stdout and run.pk == int(wide.stdout.splitlines()[1].split()[0])


def test_a_bad_config_prints_each_field_error_and_creates_nothing(cli, config_file, config):
    bad = cli("runs", "launch", config_file({**config, "lr": -1, "group_size": 1}))
    lines = assert_failed(bad, 2)
    assert any(line.startswith("error: lr: must be in (0, 1]") for line in lines), lines
    assert any(line.startswith("error: group_size: ") for line in lines), lines
    assert_failed(cli("runs", "launch", config_file(text="lr: [1, 2\n")), 2, "error: config: ", "not valid YAML")
    assert_failed(cli("runs", "launch", config_file(text="- 1\n- 2\n")), 2, "error: config: ", "mapping")
    assert_failed(cli("runs", "launch", str(config_file()) + ".missing"), 2, "error: config: cannot read")
    assert_failed(cli("runs", "launch", config_file(), "--project", "nope"), 2, "error: project: no project 'nope'")
    assert not Run.objects.exists()


def test_a_json_config_and_url_and_token_options(cli, config_file, config, live_server, alice):
    path = config_file(text=json.dumps(config), name="config.json")
    # the options win over the environment, before or after the command
    result = cli("--url", live_server.url, "runs", "launch", path, "--token", alice[1], token="sb_wrong",
                 url="http://127.0.0.1:9")
    assert Run.objects.get(pk=launched_id(result)).config["group_size"] == 4


# --- failures: token, other users, the network, settings ----------------------------------------------------------

def test_a_refused_or_missing_token(cli, live_server):
    refused = cli("runs", "list", token="sb_not-a-real-token")
    assert_failed(refused, 3, "token", "python manage.py api_token USERNAME", f"{live_server.url}/account/tokens/")
    assert_failed(cli("runs", "list", token=None), 2, "SEEDBED_TOKEN")
    assert_failed(cli("runs", "list", url=None), 2, "SEEDBED_URL")
    assert_failed(cli("runs", "list", url="127.0.0.1:8000"), 2, "SEEDBED_URL", "http://HOST:PORT")
    assert_failed(cli("runs", "list", "--status", "done"), 2, "--status", "invalid choice: 'done'")


def test_another_users_run_is_not_found_and_untouched(cli, config_file, bob):
    run_id = launched_id(cli("runs", "launch", config_file(), "--project", "vision"))
    for args in (("runs", "get", str(run_id)), ("runs", "kill", str(run_id)), ("runs", "watch", str(run_id))):
        assert_failed(cli(*args, token=bob[1]), 4, "error: not found: ", "in your projects")
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.QUEUED and run.kill_requested_at is None
    listed = cli("runs", "list", token=bob[1])
    assert listed.returncode == 0 and listed.stdout.strip().splitlines() == ["ID  NAME  PROJECT  STATUS  STEP"]


def test_an_unreachable_server_is_exit_5_naming_the_url(cli):
    assert_failed(cli("runs", "list", url="http://127.0.0.1:9"), 5, "http://127.0.0.1:9", "cannot reach")


# --- projects, sweeps and evaluations -----------------------------------------------------------------------------

def test_projects_create_add_member_and_list(cli, bob):
    created = cli("projects", "create", "nlp")
    assert created.returncode == 0 and "nlp" in created.stdout and "admin" in created.stdout, created.stderr
    assert_failed(cli("projects", "create", "nlp"), 2, "error: name: you have a project named 'nlp' already")
    added = cli("projects", "add-member", "nlp", "bob", "member")
    assert added.returncode == 0 and added.stdout.strip() == "bob is member in project nlp", added.stderr
    assert Membership.objects.get(project__name="nlp", user=bob[0]).role == "member"
    assert_failed(cli("projects", "add-member", "nlp", "nobody", "viewer"), 2, "error: username: no active user")
    assert_failed(cli("projects", "add-member", "nlp", "alice", "admin", token=bob[1]), 4, "forbidden")
    listed = cli("projects", "list", token=bob[1])
    assert listed.returncode == 0, listed.stderr
    assert [row.split()[:2] for row in listed.stdout.strip().splitlines()[1:]] == [["bob", "admin"],
                                                                                   ["nlp", "member"]]


def test_sweeps_launch_and_get_and_evals_get(cli, config_file, alice):
    from webapp.evals import services as eval_services

    result = cli("sweeps", "launch", config_file(), "--seeds", "2", "--concurrency", "1", "--name", "two")
    assert result.returncode == 0, result.stderr
    sweep = Sweep.objects.get()
    assert result.stdout.startswith(f"sweep {sweep.pk} in project alice: 2 runs")
    assert (sweep.name, sweep.concurrency, sweep.policy["name"], sweep.runs.count()) == ("two", 1, "median", 2)
    got = json.loads(cli("sweeps", "get", str(sweep.pk)).stdout)
    assert sorted(r["seed"] for r in got["runs"]) == sorted(sweep.runs.values_list("seed", flat=True))
    assert_failed(cli("sweeps", "launch", config_file(), "--seeds", "0"), 2, "error: seeds: ")
    assert Sweep.objects.count() == 1

    job = eval_services.eval_create(run=sweep.runs.first(), models=["base"], user=alice[0], task="arithmetic",
                                   problems=8, n=4, ks=[1, 2])
    evaluated = json.loads(cli("evals", "get", str(job.pk)).stdout)
    assert (evaluated["id"], evaluated["status"], evaluated["total"]) == (job.pk, "queued", 8)
    assert_failed(cli("evals", "get", str(job.pk + 1000)), 4, "not found")
    sweeps = cli("sweeps", "list").stdout.strip().splitlines()
    assert sweeps[0].split() == ["ID", "NAME", "PROJECT", "SEEDS", "CONCURRENCY", "PACK", "POLICY"]
    assert [row.split() for row in sweeps[1:]] == [[str(sweep.pk), "two", "alice", "2", "1", "1", "median"]]
    evals = cli("evals", "list").stdout.strip().splitlines()
    assert [row.split() for row in evals[1:]] == [[str(job.pk), *job.display_name.split(), "alice", "arithmetic",
                                                   "queued", "0/8"]]
    assert cli("evals", "list", "--project", "vision").stdout.strip().splitlines()[1:] == []


def test_a_listing_piped_into_head_ends_quietly(live_server, alice, config):
    from webapp.projects.models import Project

    # more lines than a pipe holds (64 kB), so the client is still writing when head has gone
    project = Project.objects.get(name="alice")
    Run.objects.bulk_create([Run(project=project, config=config, seed=i, name=f"run number {i:05d} " + "x" * 40)
                             for i in range(1000)])
    shell = subprocess.run(" ".join(client_argv("runs", "list", "--limit", "1000")) + " | head -1", shell=True, cwd=REPO,
                           env=client_env(live_server.url, alice[1]), capture_output=True, text=True, timeout=60)
    assert shell.stdout.split() == ["ID", "NAME", "PROJECT", "STATUS", "STEP"] and "Traceback" not in shell.stderr


# --- watch --------------------------------------------------------------------------------------------------------

class Watcher:
    """``runs watch ID`` in the background, its stdout and stderr going to files the test reads while it runs."""

    def __init__(self, live_server, token: str, run_id: int, tmp_path):
        self.out, self.err = tmp_path / f"watch-{run_id}.out", tmp_path / f"watch-{run_id}.err"
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(client_argv("runs", "watch", str(run_id), "--interval", "0.1"), cwd=REPO,
                                         env=client_env(live_server.url, token), stdout=out, stderr=err, text=True,
                                         preexec_fn=as_from_a_terminal)

    def stderr(self) -> str:
        with open(self.err, newline="") as fh:  # keep the \r of the redraws
            return fh.read()

    def stdout(self) -> str:
        return self.out.read_text()

    def wait_for_stderr(self, text: str) -> None:
        wait_for(lambda: text in self.stderr() or self.proc.poll() is not None, timeout=15,
                 what=f"{text!r} on the watcher's stderr")
        assert text in self.stderr(), (self.proc.returncode, self.stderr())

    def finish(self) -> int:
        try:
            return self.proc.wait(timeout=15)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.fixture
def watch(live_server, alice, tmp_path):
    watchers = []

    def start(run_id: int, token: str = alice[1]) -> Watcher:
        watchers.append(Watcher(live_server, token, run_id, tmp_path))
        return watchers[-1]
    yield start
    for watcher in watchers:
        if watcher.proc.poll() is None:
            watcher.proc.kill()
            watcher.proc.wait()


def queued_run(alice, config) -> int:
    return run_services.run_create(config=config, user=alice[0], name="watched").pk


def test_watch_follows_a_run_to_success(watch, alice, config):
    run_id = queued_run(alice, config)
    watcher = watch(run_id)
    watcher.wait_for_stderr("0/6 queued")
    run_services.run_start(run_id=run_id, worker="test")
    run_services.run_metrics_append(run_id=run_id, points=[(s, "reward/mean", 0.25) for s in (1, 2, 3)])
    watcher.wait_for_stderr("3/6 running  reward/mean 0.250")
    run_services.run_metrics_append(run_id=run_id, points=[(s, "reward/mean", s / 8) for s in (4, 5, 6)])
    watcher.wait_for_stderr("6/6 running  reward/mean 0.750")
    assert watcher.proc.poll() is None  # a run at its last step still runs until the worker finishes it
    run_services.run_finish(run_id=run_id, status="succeeded")
    assert watcher.finish() == 0, watcher.stderr()
    assert "\r[########################] 6/6 succeeded" in watcher.stderr()
    assert watcher.stdout().strip() == f"run {run_id} succeeded at step 6/6  reward/mean 0.750"
    assert "error" not in watcher.stderr()


def test_watch_in_a_terminal_ends_its_last_line(live_server, alice, config):
    """As a terminal shows it (stdout and stderr on one pseudo-terminal): the progress line is ended before the
    final line, and the final line itself ends with a newline, so the shell's prompt starts a line of its own."""
    import pty

    run_id = queued_run(alice, config)
    run_services.run_start(run_id=run_id, worker="test")
    run_services.run_metrics_append(run_id=run_id, points=[(s, "reward/mean", 0.5) for s in range(1, 7)])
    run_services.run_finish(run_id=run_id, status="succeeded")
    main, terminal = pty.openpty()
    proc = subprocess.Popen(client_argv("runs", "watch", str(run_id), "--interval", "0.1"), cwd=REPO,
                            env=client_env(live_server.url, alice[1]), stdin=subprocess.DEVNULL, stdout=terminal,
                            stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:  # until the client has exited and its terminal is closed (EIO)
        try:
            chunk = os.read(main, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert proc.wait(timeout=CLIENT_TIMEOUT_S) == 0
    text = shown.decode().replace("\r\n", "\n")  # (a terminal writes a newline as CR LF)
    assert text.endswith(f"run {run_id} succeeded at step 6/6  reward/mean 0.500\n"), repr(text)
    assert "0.500\nrun " in text  # the progress line ended before the final line began


def test_watch_of_a_failed_run_exits_1_with_its_error(watch, alice, config):
    run_id = queued_run(alice, config)
    watcher = watch(run_id)
    watcher.wait_for_stderr("0/6 queued")
    run_services.run_start(run_id=run_id, worker="test")
    run_services.run_metrics_append(run_id=run_id, points=[(1, "reward/mean", 0.5), (2, "reward/mean", 0.125)])
    watcher.wait_for_stderr("2/6 running")
    run_services.run_finish(run_id=run_id, status="failed", error="boom")
    assert watcher.finish() == 1
    assert watcher.stdout().strip() == f"run {run_id} failed at step 2/6  reward/mean 0.125"
    assert watcher.stderr().strip().splitlines()[-1] == f"error: run {run_id} failed: boom"


def test_ctrl_c_stops_watching_but_not_the_run(watch, alice, config):
    run_id = queued_run(alice, config)
    watcher = watch(run_id)
    watcher.wait_for_stderr("0/6 queued")
    watcher.proc.send_signal(signal.SIGINT)
    assert watcher.finish() == 130
    assert "stopped watching" in watcher.stderr() and "Traceback" not in watcher.stderr()
    run = Run.objects.get(pk=run_id)
    assert run.status == RunStatus.QUEUED and run.kill_requested_at is None


# --- datasets -----------------------------------------------------------------------------------------------------

def test_upload_list_and_get_a_dataset_then_launch_a_run_on_it(cli, tmp_path, settings, config_file, config):
    settings.SEEDBED_LIBRARY_DIR = tmp_path / "library"
    data = tmp_path / "adds.csv"
    data.write_text("question,answer\n" + "".join(f"{i} + 1?,{i + 1}\n" for i in range(12)))
    uploaded = cli("datasets", "upload", str(data), "--name", "adds", "--project", "vision")
    assert uploaded.returncode == 0, uploaded.stderr
    assert uploaded.stdout.strip() == ("dataset adds: 12 rows in project vision; a config names it as task: "
                                       "dataset:adds")
    listed = cli("datasets", "list")
    assert re.search(r"^\d+\s+dataset:adds\s+vision\s+12\s+upload$", listed.stdout, re.MULTILINE), listed.stdout
    dataset_id = int(listed.stdout.splitlines()[-1].split()[0])
    detail = json.loads(cli("datasets", "get", str(dataset_id)).stdout)
    assert (detail["prompt_field"], detail["preview"][0]) == ("question", {"question": "0 + 1?", "answer": "1"})
    # bare answers, and nothing asks for the \boxed{} that math reads: refused with the verifier's reason
    assert_failed(cli("runs", "launch", config_file({**config, "task": "dataset:adds"}), "--project", "vision"), 2,
                  "rewards: the math verifier scores the first row's reference answer \"1\" 0.0 (\"no final answer")
    run_id = launched_id(cli("runs", "launch", config_file({**config, "task": "dataset:adds", "answer_instruction":
                                                             "Put your final answer within \\boxed{}."}),
                             "--project", "vision"))
    assert json.loads(cli("runs", "get", str(run_id)).stdout)["config"]["data_path"] == detail["path"]
    assert_failed(cli("datasets", "upload", str(data), "--name", "adds", "--project", "vision"), 2,
                  "error: name: project vision has a dataset named 'adds' already")
    assert_failed(cli("datasets", "upload", str(tmp_path / "missing.jsonl"), "--name", "x"), 2,
                  "error: file: cannot read")


def test_sweeps_policies_lists_every_rule_of_the_registry_with_its_parameters(cli):
    from webapp.sweeps.policies import RULES

    listed = cli("sweeps", "policies")
    assert listed.returncode == 0, listed.stderr
    names = [line.split(":")[0] for line in listed.stdout.splitlines() if not line.startswith(" ")]
    assert names == [*RULES, "(every rule)"]
    assert "risk 0.05 (in (0, 0.5])" in listed.stdout and "eta 2 (>= 2)" in listed.stdout


def test_sweeps_launch_with_a_budget_starts_new_seeds_within_it_and_a_bad_budget_names_budget(cli, config_file,
                                                                                              alice):
    from webapp.sweeps.models import SweepPlan

    assert_failed(cli("sweeps", "launch", config_file(), "--seeds", "3", "--budget", "2"), 2,
                  "error: budget: must be at least the 3 runs the sweep starts with")
    assert_failed(cli("sweeps", "launch", config_file(), "--seeds", "3", "--budget", "0"), 2, "error: budget: ")
    assert not Sweep.objects.exists()
    result = cli("sweeps", "launch", config_file(), "--seeds", "3", "--budget", "8")
    assert result.returncode == 0, result.stderr
    plan = SweepPlan.objects.get(sweep=Sweep.objects.get())
    assert (plan.free_slot_use, plan.budget) == ("new_seed", 8)


def test_sweeps_stop_ends_the_whole_sweep_and_a_second_stop_is_a_conflict(cli, config_file, bob):
    result = cli("sweeps", "launch", config_file(), "--seeds", "2", "--concurrency", "1", "--budget", "4")
    assert result.returncode == 0, result.stderr
    sweep = Sweep.objects.get()
    assert_failed(cli("sweeps", "stop", str(sweep.pk), token=bob[1]), 4, "not found")
    stopped = cli("sweeps", "stop", str(sweep.pk), "--reason", "wrong data")
    assert stopped.returncode == 0, stopped.stderr
    runs = list(sweep.runs.order_by("pk").values_list("pk", flat=True))
    assert stopped.stdout.strip() == f"sweep {sweep.pk} stopped by user:alice; runs killed: {runs[0]}, {runs[1]}"
    sweep.refresh_from_db()
    assert (sweep.stopped_by, sweep.stop_reason) == ("user:alice", "wrong data")
    assert set(sweep.runs.values_list("status", flat=True)) == {RunStatus.KILLED} and sweep.runs.count() == 2
    assert_failed(cli("sweeps", "stop", str(sweep.pk)), 4, "already stopped by user:alice")
