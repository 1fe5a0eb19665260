"""The training core under torchrun (training.distributed): real torchrun, real gloo, the tiny model.

Equivalence: N ranks sharing a step's groups must train exactly the model one process trains on the same global
batch. The completions are identical (every row samples from its own seed), so rewards, lengths and the gradient
norm agree to float rounding; what differs is only the order in which the ranks' gradients are summed (all-reduce
or reduce-scatter) against one process's batched sum: ~1e-7 relative in each gradient. Adam divides each update
by sqrt(v), so a parameter whose gradient is near Adam's eps (1e-8) can turn that rounding into a visible part of
its update: the parameters agree to 1e-5 after 3 steps at lr 1e-4, i.e. within a tenth of one step's largest
move (Adam's first steps move a parameter by about lr), while they move by ~3e-4. A wrong loss scale (a rank's
loss not its share of the global loss) shows in the gradient norm, which must agree to 1e-4 relative; a missing
optimizer state on resume shows in the parameters (Adam's first step from a reset state is lr·sign(g)).
"""
from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from safetensors.torch import load_file

from tests.conftest import tiny_config, wait_for
from training.config import TrainConfig
from training.ranks import placement_errors, torchrun_command
from training.engines import run_engine
from training.engines.process import EngineFailed
from training.fields import FieldErrors
from training.sink import NullSink

PARAM_ATOL = 4e-5  # float order differs across world sizes and AdamW amplifies it (runs move by ~4e-4)
GRAD_NORM_RTOL = 1e-4


class ListSink(NullSink):
    def __init__(self):
        self.metrics, self.checkpoints, self.logs, self.ranks, self.truncated = {}, [], [], [], []

    def truncate_after(self, step): self.truncated.append(step)
    def on_metrics(self, step, metrics): self.metrics[step] = metrics
    def on_samples(self, step, rows): pass
    def on_checkpoint(self, step, path): self.checkpoints.append((step, path))
    def on_log(self, line): self.logs.append(line)
    def on_ranks(self, step, ranks): self.ranks.append((step, ranks))
    def flush(self): pass


def config(**overrides) -> TrainConfig:
    return TrainConfig.from_dict(tiny_config(**{"total_steps": 3, "prompts_per_step": 4, "group_size": 4,
                                                "max_new_tokens": 8, **overrides}))


def train(tmp_path, name: str, **overrides):
    sink = ListSink()
    result = run_engine(config(**overrides), str(tmp_path / name), sink)
    return result, sink


def weights(run_dir, step: int) -> dict:
    return load_file(os.path.join(run_dir, "checkpoints", f"step_{step:06d}", "model.safetensors"))


def assert_same_training(a_sink, a_dir, b_sink, b_dir, step):
    for s in range(1, step + 1):
        a, b = a_sink.metrics[s], b_sink.metrics[s]
        for key in ("reward/mean", "reward/std", "length/mean", "length/max", "accuracy", "frac_zero_std_groups"):
            assert a[key] == pytest.approx(b[key], abs=1e-6), (s, key)  # the same completions, the same verdicts
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=GRAD_NORM_RTOL), s
    wa, wb = weights(a_dir, step), weights(b_dir, step)
    base = load_file(os.path.join(TrainConfig().resolved_model_path(), "model.safetensors"))
    diff = max((wa[k] - wb[k]).abs().max().item() for k in wa)
    moved = max((wa[k] - base[k]).abs().max().item() for k in wa)
    assert moved > 2e-4, "the runs did not train: the comparison would prove nothing"
    assert diff < PARAM_ATOL, f"parameters differ by {diff:g} (moved {moved:g})"


@pytest.mark.parametrize("strategy, overrides", [
    ("ddp", {}),                                                               # GRPO: seq-mean-token-mean
    ("fsdp", {"preset": "dapo", "dynamic_sampling": False}),                   # token-mean, Clip-Higher
    ("ddp", {"preset": "dr_grpo", "minibatch_size": 8, "kl_coef": 0.05}),      # sum-norm, 2 minibatches, KL
])
def test_two_ranks_train_the_model_one_process_trains(tmp_path, tiny_model_dir, strategy, overrides):
    one, one_sink = train(tmp_path, "one", **overrides)
    two, two_sink = train(tmp_path, "two", nproc_per_node=2, strategy=strategy, **overrides)
    assert one.status == two.status == "succeeded" and one.step == two.step == 3
    assert_same_training(one_sink, tmp_path / "one", two_sink, tmp_path / "two", 3)
    # the ranks reported themselves: two processes, both on this host, at every step
    step, ranks = two_sink.ranks[-1]
    assert step == 3 and [r["rank"] for r in ranks] == [0, 1] and len({r["pid"] for r in ranks}) == 2
    assert all(r["pid"] != os.getpid() and r["host"] for r in ranks)
    assert not any(os.path.exists(f"/proc/{r['pid']}") for r in ranks)  # every rank has exited


def test_dynamic_sampling_ranks_stop_together_and_keep_the_groups_one_process_keeps(tmp_path, tiny_model_dir):
    overrides = {"preset": "dapo", "dynamic_sampling": True, "max_gen_batches": 3, "total_steps": 3}
    one, one_sink = train(tmp_path, "one", **overrides)
    two, two_sink = train(tmp_path, "two", nproc_per_node=2, strategy="ddp", **overrides)
    for s in (1, 2, 3):
        for key in ("num_gen_batches", "num_groups_trained", "reward/mean", "frac_zero_std_groups"):
            assert one_sink.metrics[s][key] == pytest.approx(two_sink.metrics[s][key], abs=1e-6), (s, key)
    assert max(m["num_gen_batches"] for m in one_sink.metrics.values()) > 1, "dynamic sampling never resampled"
    assert_same_training(one_sink, tmp_path / "one", two_sink, tmp_path / "two", 3)


@pytest.mark.parametrize("first, then", [({"nproc_per_node": 2, "strategy": "fsdp"}, {}),
                                         ({}, {"nproc_per_node": 2, "strategy": "ddp"})])
def test_a_checkpoint_resumes_at_another_world_size(tmp_path, tiny_model_dir, first, then):
    """2 ranks → 1 and 1 → 2: the optimizer's sharded state (DCP) and the generators carry over, so 2 + 2 steps
    equal 4 uninterrupted steps."""
    straight, straight_sink = train(tmp_path, "straight", total_steps=4)
    half, _ = train(tmp_path, "resumed", total_steps=2, **first)
    assert half.step == 2 and os.path.isdir(tmp_path / "resumed" / "checkpoints" / "step_000002" / "optim")
    rest, rest_sink = train(tmp_path, "resumed", total_steps=4, **then)
    assert rest.status == "succeeded" and rest.step == 4 and rest_sink.truncated == [2]
    assert sorted(rest_sink.metrics) == [3, 4]
    rest_sink.metrics = {**straight_sink.metrics, **rest_sink.metrics}
    assert_same_training(straight_sink, tmp_path / "straight", rest_sink, tmp_path / "resumed", 4)


def test_a_stop_request_stops_every_rank_after_one_step_with_a_checkpoint(tmp_path, tiny_model_dir):
    stop = threading.Event()
    sink = ListSink()
    result = {}
    t = threading.Thread(target=lambda: result.update(r=run_engine(
        config(total_steps=5000, nproc_per_node=2, strategy="ddp"), str(tmp_path / "run"), sink, stop.is_set)))
    t.start()
    wait_for(lambda: len(sink.metrics) >= 3, timeout=120, what="three steps")
    pids = [r["pid"] for r in sink.ranks[-1][1]]
    stop.set()
    t.join(timeout=60)
    assert not t.is_alive() and result["r"].status == "stopped"
    last = result["r"].step
    assert sink.checkpoints[-1][0] == last and last == max(sink.metrics) and last < 5000
    assert os.path.isdir(os.path.join(sink.checkpoints[-1][1], "optim"))
    assert not any(os.path.exists(f"/proc/{p}") for p in pids)


def test_a_rank_killed_fails_the_run_naming_it_and_leaves_no_process(tmp_path, tiny_model_dir):
    sink = ListSink()
    outcome = {}

    def go():
        try:
            run_engine(config(total_steps=5000, nproc_per_node=2, strategy="ddp"), str(tmp_path / "run"), sink)
        except EngineFailed as exc:
            outcome["error"] = str(exc)

    t = threading.Thread(target=go)
    t.start()
    wait_for(lambda: sink.ranks, timeout=120, what="the ranks' report")
    ranks = {r["rank"]: r["pid"] for r in sink.ranks[-1][1]}
    launcher = int(open(tmp_path / "run" / "engine.pid").read())
    os.kill(ranks[1], signal.SIGKILL)
    killed_at = time.monotonic()
    t.join(timeout=60)
    assert not t.is_alive()
    assert "rank 1 (local_rank 1" in outcome["error"] and "SIGKILL" in outcome["error"]
    # rank 0 and torchrun are gone within the grace period (torchrun tears down the others; Seedbed kills what is left)
    assert time.monotonic() - killed_at < 20
    assert not any(os.path.exists(f"/proc/{p}") for p in (ranks[0], launcher))


def test_fsdp_on_more_ranks_than_gpus_is_refused_before_any_rank_starts(tmp_path, monkeypatch):
    """Two fsdp ranks sharing one GPU crashed with SIGSEGV on an H200 (bench/curves/gpu_check_2026-12-04.txt);
    the supervisor refuses them with the field named, and writes nothing of the run. One GPU stands in (none here);
    ddp on the same node and fsdp on two GPUs pass the check, and a CPU run has no GPU to count."""
    import torch

    from training.engines.seedbed import node_gpus, run_distributed
    from training.fields import FieldErrors
    from training.sink import NullSink

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    cfg = TrainConfig.from_dict(tiny_config(nproc_per_node=2, strategy="fsdp", device="cuda"))
    with pytest.raises(FieldErrors) as caught:
        run_distributed(cfg, str(tmp_path / "run"), NullSink(), should_stop=lambda: False)
    assert set(caught.value.errors) == {"strategy"}
    assert "1 GPU for nproc_per_node 2" in caught.value.errors["strategy"] and "ddp" in caught.value.errors["strategy"]
    assert not (tmp_path / "run").exists()
    assert placement_errors(TrainConfig.from_dict(tiny_config(nproc_per_node=2, strategy="ddp", device="cuda")), 1) == {}
    assert placement_errors(cfg, 2) == {}
    assert node_gpus("cuda") == 1 and node_gpus("auto") == 1 and node_gpus("cpu") == 0


def test_ranks_and_strategy_are_validated_with_the_field_named():
    def errors(**kw):
        try:
            TrainConfig.from_dict(tiny_config(**kw))
        except FieldErrors as exc:
            return exc.errors
        return {}

    assert "strategy" in errors(nproc_per_node=2)  # two ranks, no strategy
    assert "strategy" in errors(strategy="ddp")  # a strategy with one rank
    assert "prompts_per_step" in errors(nproc_per_node=3, strategy="ddp", prompts_per_step=4)
    assert "keep_routing" in errors(nproc_per_node=2, strategy="fsdp", keep_routing=True)
    assert "nnodes" in errors(engine="trl", nnodes=2)
    assert "strategy" in errors(engine="trl", nproc_per_node=2, strategy="fsdp")
    assert errors(nproc_per_node=2, nnodes=2, strategy="fsdp", prompts_per_step=8) == {}
    assert errors(nnodes=65)["nnodes"]
    assert "collective_timeout_s" in errors(collective_timeout_s=5) and "collective_timeout_s" in errors(
        collective_timeout_s=7200)  # bounded: 10 s to an hour (300 by default)
    assert TrainConfig.from_dict(tiny_config()).collective_timeout_s == 300
    assert "seedbed" in errors(engine="trl", collective_timeout_s=60)["collective_timeout_s"]  # not silently ignored


def test_torchrun_commands_for_one_node_and_for_node_one_of_two():
    one = torchrun_command(config(nproc_per_node=2, strategy="ddp"), "/r")
    assert "--standalone" in one and one[one.index("--max-restarts") + 1] == "0"
    two = torchrun_command(config(nproc_per_node=2, nnodes=2, strategy="ddp"), "/r", node_rank=1,
                           master=("10.0.0.5", 29411))
    assert "--standalone" not in two
    assert [two[two.index(f) + 1] for f in ("--nnodes", "--node-rank", "--master-addr", "--master-port")] == \
        ["2", "1", "10.0.0.5", "29411"]
    assert two[-3:] == ["-m", "training.engines.entry.seedbed", "/r"]


# rank 1 of the run never comes to step 2's all-reduce of the update's statistics (a rank stuck, or one that
# skipped it): its peer must not wait for ever (gloo alone would wait torch's 30 minutes)
RANK_1_STUCK = '''
import os
if os.environ.get("RANK") == "1":
    import time
    import training.distributed as d
    real = d.World.mean_stats
    def mean_stats(self, stats):
        if self.step == 2:
            time.sleep(3600)
        return real(self, stats)
    d.World.mean_stats = mean_stats
'''


def test_a_collective_past_its_timeout_fails_the_run_naming_the_rank_the_collective_and_the_step(
        tmp_path, tiny_model_dir, monkeypatch):
    (tmp_path / "fault").mkdir()
    (tmp_path / "fault" / "sitecustomize.py").write_text(RANK_1_STUCK)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "fault"))
    sink = ListSink()
    outcome = {}

    def go():
        try:
            run_engine(config(total_steps=4, nproc_per_node=2, strategy="ddp", collective_timeout_s=10),
                       str(tmp_path / "run"), sink)
        except EngineFailed as exc:
            outcome["error"] = str(exc)

    t = threading.Thread(target=go)
    t.start()
    wait_for(lambda: 1 in sink.metrics or not t.is_alive(), timeout=120, what="step 1")
    step_1 = time.monotonic()
    t.join(timeout=90)
    assert not t.is_alive(), "the run still waits"
    took = time.monotonic() - step_1
    assert "rank 0 waited 10 s in all_reduce at step 2" in outcome["error"].partition("\n")[0], outcome["error"]
    # rank 0 fails after the timeout; rank 1, told to stop by torchrun and never reaching a step's end, exits one
    # timeout after that
    assert 10 < took < 2 * 10 + 20, took
