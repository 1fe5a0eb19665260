"""The engine interface (training.engines): the JSONL event contract, the external-process supervisor, TRL's
config mapping and reward functions, and real TRL runs (torchrun, 1 and 2 processes) on the tiny model: curves
arrive while it runs, a stop saves a checkpoint and ends "stopped", a second start resumes from it."""
from __future__ import annotations

import json
import os
import sys
import time

import pytest

from tests.conftest import process_alive as alive, tiny_config, wait_for
from training.config import TrainConfig
from training.engines import engine_errors, run_engine
from training.engines.events import EventReader, parse_event
from training.engines.process import EngineFailed, RankLost, run_process
from training.fields import FieldErrors
from training.sink import NullSink


class ListSink(NullSink):
    """Collects what an engine emits, with the time each metric arrived."""

    def __init__(self):
        self.metrics, self.samples, self.checkpoints, self.logs = [], [], [], []
        self.arrived, self.truncated, self.engine_config = [], [], None

    def truncate_after(self, step): self.truncated.append(step)
    def on_metrics(self, step, metrics): self.metrics.append((step, metrics)); self.arrived.append(time.monotonic())
    def on_samples(self, step, rows): self.samples.append((step, rows))
    def on_checkpoint(self, step, path): self.checkpoints.append((step, path))
    def on_log(self, line): self.logs.append(line)
    def on_engine_config(self, config): self.engine_config = config
    def flush(self): pass


# --- the event contract ---------------------------------------------------------------------------------

def test_events_are_read_line_by_line_and_a_bad_line_is_reported_not_fatal(tmp_path):
    path = tmp_path / "events.jsonl"
    reader = EventReader(str(path))
    assert reader.read() == ([], [])  # not written yet
    with open(path, "w") as fh:
        fh.write('{"step": 1, "metrics": {"reward/mean": 0.5, "note": "text is left out"}}\n')
        fh.write('not json\n{"step": "two", "metrics": {}}\n')
        fh.write('{"step": 3, "metrics": {"reward/mean": 0.75}')  # still being written: no newline yet
    events, problems = reader.read()
    assert [(e.step, e.metrics) for e in events] == [(1, {"reward/mean": 0.5})]
    assert [n for n, _ in problems] == [2, 3] and "not JSON" in problems[0][1] and "step" in problems[1][1]
    with open(path, "a") as fh:
        fh.write('}\n{"step": 3, "checkpoint": "checkpoints/x"}\n')
    events, problems = reader.read()
    assert [(e.step, e.metrics, e.checkpoint) for e in events] == [(3, {"reward/mean": 0.75}, ""),
                                                                   (3, {}, "checkpoints/x")]
    assert problems == []


def test_the_contract_bounds_what_a_line_may_hold():
    with pytest.raises(ValueError, match="step"):
        parse_event('{"step": 2147483648, "metrics": {}}')
    with pytest.raises(ValueError, match="metrics: at most"):
        parse_event(json.dumps({"step": 1, "metrics": {f"m{i}": 1 for i in range(1001)}}))
    with pytest.raises(ValueError, match="reward must be a finite number"):
        parse_event('{"step": 1, "samples": [{"completion": "x", "reward": "high"}]}')
    assert parse_event('{"step": 1, "metrics": {"a": NaN, "b": 2}}').metrics == {"b": 2.0}


def _script(tmp_path, body: str) -> list[str]:
    path = tmp_path / "trainer.py"
    path.write_text("import json, os, signal, sys, time\nEV = os.environ['SEEDBED_EVENTS']\n"
                    "STOP = os.environ['SEEDBED_STOP_FILE']\n"
                    "def emit(obj):\n    with open(EV, 'a') as fh: fh.write(json.dumps(obj) + '\\n')\n" + body)
    return [sys.executable, str(path)]


def test_a_stopped_engine_is_stopped_whatever_its_exit_code(tmp_path):
    # like torchrun after a signal: the trainer saves, then exits 1
    argv = _script(tmp_path, "for s in range(1, 1000):\n"
                             "    emit({'step': s, 'metrics': {'loss': 1.0 / s}})\n"
                             "    if os.path.exists(STOP):\n"
                             "        os.makedirs('checkpoints/c%d' % s); emit({'step': s, 'checkpoint': 'checkpoints/c%d' % s})\n"
                             "        sys.exit(1)\n"
                             "    time.sleep(0.05)\n")
    sink = ListSink()
    status, step = run_process(argv, out_dir=str(tmp_path / "run"), sink=sink, poll_s=0.05,
                               should_stop=lambda: len(sink.metrics) >= 3)
    assert status == "stopped" and step >= 3
    assert [s for s, _ in sink.metrics] == list(range(1, step + 1))
    assert sink.checkpoints == [(step, os.path.realpath(tmp_path / "run" / "checkpoints" / f"c{step}"))]


def test_a_failing_engine_fails_with_its_error_and_a_checkpoint_outside_the_run_is_refused(tmp_path):
    argv = _script(tmp_path, "emit({'step': 1, 'metrics': {'loss': 1}})\n"
                             "emit({'step': 1, 'checkpoint': '/etc'})\n"
                             "raise SystemExit('out of memory in my trainer')\n")
    sink = ListSink()
    with pytest.raises(EngineFailed, match="out of memory in my trainer"):
        run_process(argv, out_dir=str(tmp_path / "run"), sink=sink, poll_s=0.05, should_stop=lambda: False)
    assert sink.metrics == [(1, {"loss": 1.0})] and sink.checkpoints == []
    assert any("not a folder inside the run's folder" in line for line in sink.logs)


@pytest.mark.parametrize("end, lost", [("os.kill(os.getpid(), signal.SIGKILL)", True),
                                       ("os.kill(os.getpid(), signal.SIGSEGV)", True),
                                       ("os.abort()", False), ("raise SystemExit('my own error')", False)])
def test_a_rank_killed_by_a_signal_it_did_not_ask_for_is_a_lost_rank_not_a_failure(tmp_path, end, lost):
    """Real torchrun (through training.engines.torchrun, as Seedbed starts it), two ranks: rank 1 ends as
    ``end`` while rank 0 waits; the supervisor reads the rank's end from what torchrun recorded."""
    script = tmp_path / "ranks.py"
    script.write_text("import os, signal, time\n"
                      "if os.environ['RANK'] == '1':\n"
                      "    time.sleep(0.5)\n"
                      f"    {end}\n"
                      "time.sleep(60)\n")
    argv = [sys.executable, "-m", "training.engines.torchrun", "--standalone", "--nproc-per-node", "2",
            "--max-restarts", "0", str(script)]
    started = time.monotonic()
    with pytest.raises(EngineFailed) as failed:
        run_process(argv, out_dir=str(tmp_path / "run"), sink=ListSink(), poll_s=0.05, should_stop=lambda: False)
    assert time.monotonic() - started < 50  # torchrun ended rank 0 once rank 1 was gone
    assert isinstance(failed.value, RankLost) == lost, str(failed.value)
    if lost:
        signal_name = "SIGKILL" if "SIGKILL" in end else "SIGSEGV"
        assert (failed.value.rank, failed.value.signal) == (1, signal_name)
        assert str(failed.value).splitlines()[0] == f"rank 1 killed by {signal_name}"
    else:
        assert "rank 1" in str(failed.value)
    exits = {row["rank"]: row for row in json.loads((tmp_path / "run" / "rank_exits.json").read_text())}
    assert exits[1]["exitcode"] == (-6 if "abort" in end else 1 if "SystemExit" in end else -9 if lost and "KILL" in end else -11), exits


# --- TRL: the config mapping ------------------------------------------------------------------------------

def test_knobs_trl_lacks_are_field_errors_naming_the_engine():
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict(tiny_config(engine="trl", dynamic_sampling=True, kl_estimator="k1",
                                          adv_estimator="rloo", keep_routing=True, stop=["</a>"]), check_paths=False)
    errors = err.value.errors
    assert set(errors) == {"dynamic_sampling", "kl_estimator", "adv_estimator", "keep_routing", "stop"}
    assert all("trl engine" in message for message in errors.values())
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict(tiny_config(engine="trl", nproc_per_node=3), check_paths=False)
    assert "splits each minibatch (16 sequences)" in err.value.errors["nproc_per_node"]
    assert set(engine_errors(TrainConfig(nproc_per_node=2))) == {"strategy"}  # seedbed: ranks need ddp or fsdp


def test_the_mapping_reaches_trls_own_config(tmp_path):
    from trl import GRPOConfig

    from training.engines.trl import trl_args

    cfg = TrainConfig.from_dict(tiny_config(engine="trl", preset="dapo", dynamic_sampling=False, nproc_per_node=2,
                                            minibatch_size=8, ppo_epochs=2, total_steps=5, opsm_delta=0.5,
                                            overlong_filtering=True), check_paths=False)
    args = GRPOConfig(**trl_args(cfg, str(tmp_path)))
    assert (args.loss_type, args.epsilon, args.epsilon_high, args.beta) == ("dapo", 0.2, 0.28, 0.0)
    assert (args.num_generations, args.per_device_train_batch_size, args.steps_per_generation) == (4, 4, 2)
    # one rollout batch (4 prompts x 4 completions) per generation, over the 2 processes (this process is 1 of 1)
    assert args.per_device_train_batch_size * cfg.nproc_per_node * args.steps_per_generation == 16
    assert (args.num_iterations, args.max_steps, args.logging_steps) == (2, 20, 4)  # 2 epochs x 2 minibatches
    assert args.off_policy_mask_threshold == 0.5 and args.mask_truncated_completions
    assert args.use_bias_correction_kl is False  # TRL's default is True: Seedbed's unbiased_kl decides
    assert args.activation_checkpointing is False  # TRL's default is True: the same compute as Seedbed's loop


SQUARE_OK = "```python\ndef square(x):\n    return x * x\n```"
SQUARE_BAD = "```python\ndef square(x):\n    return x + x\n```"
SPECS = {
    "math": ([{"name": "math", "weight": 1.0}],
             ["The answer is \\boxed{4}", "\\boxed{\\frac{1}{2}}", "\\boxed{0.5}", "no answer", "\\boxed{5}"],
             [{"answer": a} for a in ("4", "1/2", "1/2", "4", "4")]),
    "code": ([{"name": "code", "weight": 1.0, "params": {"timeout_s": 5}}], [SQUARE_OK, SQUARE_BAD, "no code"],
             [{"tests": "assert square(3) == 9"}] * 3),
    "ifeval": ([{"name": "ifeval", "weight": 1.0}], ["all lowercase here", "Not Lowercase", "a, b"],
               [{"constraints": [{"type": "lowercase"}, {"type": "no_commas"}]}] * 3),
    "hybrid": ([{"name": "math", "weight": 1.0}, {"name": "regex", "weight": 0.5, "params": {"pattern": "boxed"}},
                {"name": "ifeval", "weight": 0.25}],
               ["\\boxed{4}", "\\boxed{5}", "4, i think"],
               [{"answer": "4", "constraints": [{"type": "no_commas"}]}] * 3),
}


@pytest.mark.parametrize("kind", sorted(SPECS))
def test_trl_reward_functions_score_exactly_as_seedbed_does(kind):
    """The same completions through TRL's reward functions (weighted as TRL sums them) and through Seedbed's
    reward: equal totals, completion by completion, and not all equal to each other."""
    from training.engines.entry.trl import RewardTerms
    from training.verifiers import build_reward

    spec, completions, examples = SPECS[kind]
    examples = [{"prompt": "q", **e} for e in examples]
    cfg = TrainConfig.from_dict(tiny_config(engine="trl", rewards=spec, samples_per_step=0), check_paths=False)
    terms = RewardTerms(cfg, writer=None, ups=1)
    n = len(completions)
    columns = [fn(prompts=["q"] * n, completions=completions, example=[json.dumps(e) for e in examples])
               for fn in terms.funcs]
    trl_totals = [sum(w * col[i] for w, col in zip(terms.weights, columns)) for i in range(n)]
    seedbed = build_reward(spec)(completions, examples)
    assert trl_totals == seedbed.totals and len(set(trl_totals)) > 1, (trl_totals, seedbed.totals)


def test_a_trl_run_scores_with_a_registered_judge(tmp_path, tiny_model_dir):
    """The ranks have no database: the judge endpoints the spec names are handed to them in a file (no keys),
    and TRL's reward is Seedbed's hybrid of exact and the judge (a local server stands in for it)."""
    from tests.verifiers.test_judge import FakeJudge
    from training.verifiers import judge as judge_module
    from training.verifiers.judge import JudgeEndpoint, set_endpoint_provider

    server = FakeJudge()
    server.script = [("reply", "Score: 7")]
    before = judge_module._provider
    set_endpoint_provider(lambda: {"grader": JudgeEndpoint(name="grader", base_url=server.url, model="g")})
    try:
        spec = [{"name": "exact", "weight": 1.0},
                {"name": "judge", "weight": 0.5, "params": {"endpoint": "grader", "retries": 0, "timeout_s": 5}}]
        sink = ListSink()
        result = run_engine(trl_config(total_steps=2, rewards=spec), str(tmp_path), sink)
    finally:
        set_endpoint_provider(before)
        server.close()
    assert result.status == "succeeded"
    metrics = sink.metrics[0][1]
    assert metrics["reward/judge/mean"] == pytest.approx(0.7) and metrics["verifier/errors"] == 0
    assert metrics["reward/mean"] == pytest.approx(metrics["reward/exact/mean"] + 0.5 * 0.7)
    assert len(server.requests) == 2 * 4 * 4  # every completion of both steps was judged, by the ranks
    assert "base_url" in (tmp_path / "judge_endpoints.json").read_text()


# --- TRL: real runs -------------------------------------------------------------------------------------

def trl_config(**overrides) -> TrainConfig:
    return TrainConfig.from_dict(tiny_config(engine="trl", **overrides))


@pytest.mark.parametrize("nproc", [1, 2])
def test_a_trl_run_streams_its_curves_stops_with_a_checkpoint_and_resumes(tmp_path, tiny_model_dir, nproc):
    out = str(tmp_path / "run")
    cfg = trl_config(total_steps=200, nproc_per_node=nproc, seed=nproc)
    sink = ListSink()
    started = time.monotonic()
    result = run_engine(cfg, out, sink, should_stop=lambda: len(sink.metrics) >= 4)
    assert result.status == "stopped" and 4 <= result.step < 200
    steps = [s for s, _ in sink.metrics]
    assert steps == list(range(1, result.step + 1))
    # live: the first step's metrics came while the run went on, not all at its end
    assert sink.arrived[-1] - sink.arrived[0] > 0.05 and sink.arrived[0] - started < 60
    first = sink.metrics[0][1]
    assert {"reward/mean", "accuracy", "entropy", "length/mean", "frac_zero_std_groups", "clip/low_frac",
            "reward/exact/mean", "trl/reward", "step_time_s", "tokens_per_s"} <= set(first)
    step, rows = sink.samples[0]
    # as the loop logs them: one completion per group, its question (not the rendered prompt) and answer
    assert step == 1 and len(rows) == 2 and "<bos>" not in rows[0]["prompt"] and rows[0]["answer"]
    assert rows[0]["prompt"].endswith("=") and set(rows[0]["details"]) == {"exact"}
    assert sink.engine_config["num_generations"] == 4 and sink.engine_config["engine"] == "trl"
    assert sink.engine_config["generation_batch_size"] == 16  # as TRL resolved it under torchrun
    ckpt_step, ckpt = sink.checkpoints[-1]
    assert ckpt_step == result.step and os.path.isfile(os.path.join(ckpt, "config.json"))
    assert os.path.isfile(os.path.join(ckpt, "model.safetensors"))  # a model folder: evaluations load it

    # a second start resumes from that checkpoint and finishes
    cfg2 = trl_config(total_steps=result.step + 2, nproc_per_node=nproc, seed=nproc)
    again = ListSink()
    result2 = run_engine(cfg2, out, again)
    assert result2.status == "succeeded" and result2.step == result.step + 2
    assert again.truncated == [result.step]
    assert [s for s, _ in again.metrics] == [result.step + 1, result.step + 2]
    assert again.checkpoints[-1][0] == result.step + 2


# --- engine: command -------------------------------------------------------------------------------------

USER_TRAINER = """\
import json, os, sys, time
config = json.load(open(sys.argv[1]))
events, stop = sys.argv[2], os.environ["SEEDBED_STOP_FILE"]
with open(events, "a") as fh:
    for step in range(1, config["total_steps"] + 1):
        fh.write(json.dumps({"step": step, "metrics": {"reward/mean": step / 10, "my/lr": 0.1}}) + "\\n")
        fh.flush()
        if os.path.exists(stop):
            sys.exit(3)  # a script that exits non-zero when stopped: still "stopped"
        time.sleep(0.02)
"""


@pytest.fixture
def registered(tmp_path, monkeypatch):
    script = tmp_path / "my_trainer.py"
    script.write_text(USER_TRAINER)
    commands = tmp_path / "commands.yaml"
    commands.write_text(f"my_trainer:\n  argv: [{sys.executable}, {script}, '{{config}}', '{{events}}']\n"
                        "  help: the lab's own trainer\n")
    monkeypatch.setenv("SEEDBED_COMMANDS", str(commands))
    return "my_trainer"


def test_a_registered_command_streams_the_contract_and_is_stopped_through_its_process_group(tmp_path, registered):
    cfg = TrainConfig.from_dict(tiny_config(engine="command", command=registered, total_steps=5), check_paths=False)
    sink = ListSink()
    assert run_engine(cfg, str(tmp_path / "a"), sink).status == "succeeded"
    assert [s for s, _ in sink.metrics] == [1, 2, 3, 4, 5] and sink.metrics[2][1] == {"reward/mean": 0.3, "my/lr": 0.1}
    long = TrainConfig.from_dict(tiny_config(engine="command", command=registered, total_steps=10_000),
                                 check_paths=False)
    sink = ListSink()
    result = run_engine(long, str(tmp_path / "b"), sink, should_stop=lambda: len(sink.metrics) >= 3)
    assert result.status == "stopped" and 3 <= result.step < 10_000


def test_a_config_names_a_registered_command_never_a_command_line(registered):
    for name in ("rm -rf /", "python evil.py", "other"):
        with pytest.raises(FieldErrors) as err:
            TrainConfig.from_dict(tiny_config(engine="command", command=name), check_paths=False)
        assert err.value.errors["command"] == f"unknown command {name!r}; registered: my_trainer"
    with pytest.raises(FieldErrors) as err:
        TrainConfig.from_dict(tiny_config(command="my_trainer"), check_paths=False)
    assert err.value.errors == {"command": "only for engine command"}


def test_trl_raises_the_reward_on_the_tiny_task(tmp_path, tiny_model_dir):
    """Learning happened on the TRL engine too: DAPO's knobs (less dynamic sampling, which TRL lacks)."""
    cfg = trl_config(preset="dapo", dynamic_sampling=False, total_steps=50, prompts_per_step=16, group_size=8,
                     max_new_tokens=6, lr=1e-4, warmup_steps=5, seed=0, samples_per_step=0)
    sink = ListSink()
    assert run_engine(cfg, str(tmp_path), sink).status == "succeeded"
    rewards = [m["reward/mean"] for _, m in sink.metrics]
    first, last = sum(rewards[:5]) / 5, sum(rewards[-5:]) / 5
    print(f"\nTRL: reward first 5 steps {first:.3f}, last 5 steps {last:.3f}")
    assert len(rewards) == 50 and last > first + 0.05, rewards


def test_what_left_the_engines_process_group_is_killed_too(tmp_path):
    """Ray starts its workers in sessions of their own: killing the engine's group misses them. Every process
    marked with the run's folder goes when the engine ends, and a new attempt kills what an earlier one left."""
    argv = _script(tmp_path, "import subprocess\n"
                             "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],\n"
                             "                     start_new_session=True)\n"
                             "open('escaped.pid', 'w').write(str(p.pid))\n"
                             "emit({'step': 1, 'metrics': {'loss': 1}})\n")
    out = tmp_path / "run"
    status, _ = run_process(argv, out_dir=str(out), sink=ListSink(), poll_s=0.05, should_stop=lambda: False)
    escaped = int((out / "escaped.pid").read_text())
    assert status == "succeeded"
    wait_for(lambda: not alive(escaped), timeout=5, what="the process that left the group to be killed")
