"""Packed seeds (docs/architecture.md#packed-seeds): several seeds of one model trained in one process, each as if
it ran alone. A packed seed's steps are compared with its solo run: the same completions, the same losses and the
same weights after each step (fp32, to the rounding of a matrix product blocked over another number of rows)."""
import json
import os
import subprocess
import sys

import pytest
import torch

from training.config import TrainConfig
from training.loop import Seed, train, train_group
from training.packing import pack_conflict
from training.sink import NullSink

REL = 1e-5  # fp32: the packed seed's numbers against its solo run's


class Recorder(NullSink):
    def __init__(self):
        self.metrics, self.samples, self.checkpoints = {}, {}, []

    def on_metrics(self, step, metrics):
        self.metrics[step] = metrics

    def on_samples(self, step, rows):
        self.samples[step] = [row["completion"] for row in rows]

    def on_checkpoint(self, step, path):
        self.checkpoints.append(path)


def config(**kw):
    base = {"preset": "dapo", "total_steps": 1, "prompts_per_step": 4, "group_size": 4, "samples_per_step": 16,
            "checkpoint_every": 0}
    return TrainConfig.from_dict({**base, **kw}, check_paths=False)


def weights(folder):
    from safetensors.torch import load_file

    return load_file(os.path.join(folder, "model.safetensors"))


def assert_close(a: float, b: float, what, scale: float = 0.0):
    assert abs(a - b) <= REL * max(abs(a), abs(b), scale), (what, a, b)


def assert_same_run(solo: Recorder, packed: Recorder, steps, start: str):
    """The same completions each step; the same losses, gradient norms and rewards; the same weights saved (their
    change from ``start``'s to 1e-3: Adam's first steps move every weight by about ±lr whatever the size of its
    gradient, so a gradient within rounding of zero can move it either way)."""
    for step in steps:
        assert packed.samples[step] == solo.samples[step], step
        for key in ("reward/mean", "accuracy", "length/mean", "grad_norm", "entropy", "num_groups_trained"):
            assert_close(packed.metrics[step][key], solo.metrics[step][key], (step, key))
        # the policy loss of a group-normalised batch is near zero: compared on the scale of its terms (|A|·ratio ≈ 1)
        assert_close(packed.metrics[step]["loss/policy"], solo.metrics[step]["loss/policy"], (step, "loss"),
                     scale=1.0)
    a, b, base = weights(solo.checkpoints[-1]), weights(packed.checkpoints[-1]), weights(start)
    assert a.keys() == b.keys()
    for name in a:
        moved = (a[name] - base[name]).norm()
        assert moved > 0 and (b[name] - a[name]).norm() <= 1e-3 * moved, name


def solo_and_packed(tmp_path, configs, **group_kw):
    solos, packs = [Recorder() for _ in configs], [Recorder() for _ in configs]
    for k, (cfg, rec) in enumerate(zip(configs, solos)):
        train(cfg, str(tmp_path / f"solo{k}"), rec)
    seeds = [Seed(cfg, str(tmp_path / f"packed{k}"), rec) for k, (cfg, rec) in enumerate(zip(configs, packs))]
    return solos, packs, train_group(seeds, **group_kw)


def random_model_folder(tmp_path, kind: str, source: str) -> str:
    """A random model of ``kind``'s architecture with ``source``'s tokenizer: SmolLM2's own config (two layers:
    its widths, grouped-query heads, tied embeddings) or a Qwen2 with biased projections and an untied head."""
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    torch.manual_seed(0)
    if kind == "smollm2":
        cfg = transformers.AutoConfig.from_pretrained(source)
        cfg.num_hidden_layers = 2
    else:
        cfg = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=96,
                                       num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                       max_position_embeddings=256, tie_word_embeddings=False)
    model = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0, 0.5)
    folder = str(tmp_path / kind)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_a_packed_seeds_first_step_is_its_solo_step_on_the_tiny_model(tmp_path):
    # the seeds differ in what packing allows: seed, learning rate, clip range, temperature
    configs = [config(seed=0), config(seed=1, lr=3e-4), config(seed=2, temperature=0.7, eps_high=0.2)]
    solos, packs, results = solo_and_packed(tmp_path, configs)
    assert [r.status for r in results] == ["succeeded"] * 3
    for solo, packed in zip(solos, packs):
        assert_same_run(solo, packed, [1], configs[0].resolved_model_path())
    assert solos[0].samples[1] != solos[1].samples[1]  # the seeds sampled their own completions


@pytest.mark.parametrize("kind", ["smollm2", "qwen2"])
def test_a_packed_seeds_first_step_is_its_solo_step_on_other_architectures(tmp_path, kind, smollm2_dir):
    folder = random_model_folder(tmp_path, kind, smollm2_dir)
    # a random model answers no sum: a reward its completions differ in (its first letter) gives the loss a gradient
    common = dict(model_path=folder, task="arithmetic", prompts_per_step=2, group_size=4, max_new_tokens=12,
                  chat_template="on", kl_coef=0.04, preset="grpo",
                  rewards=[{"name": "regex", "weight": 1.0, "params": {"pattern": "^\\W*[a-m]"}}])
    configs = [config(seed=0, **common), config(seed=5, lr=2e-4, **common)]
    solos, packs, _ = solo_and_packed(tmp_path, configs)
    for solo, packed in zip(solos, packs):
        assert 0 < solo.metrics[1]["reward/mean"] < 1 and solo.metrics[1]["grad_norm"] > 1e-3
        assert_same_run(solo, packed, [1], folder)
        assert packed.metrics[1]["kl"] == pytest.approx(solo.metrics[1]["kl"], rel=REL, abs=1e-9)


def test_several_steps_with_a_stop_and_a_seed_that_joins(tmp_path):
    """Seed 1 is stopped after its second step: the others' next steps are what they would have been; its slot
    goes to seed 3, which starts at its own step 0 beside seeds at step 2, and trains as it would alone."""
    configs = [config(seed=0, total_steps=4), config(seed=1, total_steps=4), config(seed=3, total_steps=3)]
    solos = [Recorder() for _ in configs]
    for k, (cfg, rec) in enumerate(zip(configs, solos)):
        train(cfg, str(tmp_path / f"solo{k}"), rec)
    packs = [Recorder() for _ in configs]
    stopped = Seed(configs[1], str(tmp_path / "p1"), packs[1], should_stop=lambda: len(packs[1].metrics) >= 2)
    waiting = [Seed(configs[2], str(tmp_path / "p2"), packs[2])]

    def joining(free):
        return [waiting.pop()] if waiting and free else []

    results = train_group([Seed(configs[0], str(tmp_path / "p0"), packs[0]), stopped], joining=joining)
    assert [(r.status, r.step) for r in results] == [("succeeded", 4), ("stopped", 2), ("succeeded", 3)]
    start = configs[0].resolved_model_path()
    assert_same_run(solos[0], packs[0], [1, 2, 3, 4], start)
    assert_same_run(solos[2], packs[2], [1, 2, 3], start)
    assert packs[1].checkpoints[-1].endswith("step_000002")  # the stopped seed can be resumed


def test_packed_seeds_resume_each_from_its_own_checkpoint(tmp_path):
    """Two seeds packed for 2 steps, then resumed packed (with a new seed beside them) to step 4: each equals
    its uninterrupted solo run."""
    solo = [Recorder(), Recorder()]
    for k, s in enumerate((0, 1)):
        train(config(seed=s, total_steps=4), str(tmp_path / f"solo{k}"), solo[k])
    first = [Recorder(), Recorder()]
    train_group([Seed(config(seed=s, total_steps=2), str(tmp_path / f"p{k}"), first[k]) for k, s in enumerate((0, 1))])
    again = [Recorder(), Recorder(), Recorder()]
    results = train_group([Seed(config(seed=s, total_steps=4), str(tmp_path / f"p{k}"), again[k])
                           for k, s in enumerate((0, 1, 7))])
    assert [r.step for r in results] == [4, 4, 4]
    for k in (0, 1):
        assert sorted(again[k].metrics) == [3, 4]
        assert_same_run(solo[k], again[k], [3, 4], config().resolved_model_path())


def test_the_packable_model_types_are_the_stacked_decoders_family():
    from training.packing import PACKABLE_MODEL_TYPES
    from training.prefill import LLAMA_FAMILY

    assert PACKABLE_MODEL_TYPES == LLAMA_FAMILY


def test_the_packing_rule_names_the_field():
    assert pack_conflict([config(seed=0), config(seed=1, lr=1e-3, temperature=0.5)]) is None
    reason = pack_conflict([config(seed=0), config(seed=1, prompts_per_step=8)])
    assert reason.startswith("prompts_per_step differs (4 and 8)")
    assert "kl_coef: zero for some seeds" in pack_conflict([config(kl_coef=0.0), config(kl_coef=0.1)])
    assert pack_conflict([config(kl_coef=0.01), config(kl_coef=0.1)]) is None
    assert "nproc_per_node" in pack_conflict([config(nproc_per_node=2, strategy="ddp"), config()])
    assert "engine trl" in pack_conflict([TrainConfig.from_dict({"engine": "trl"}, check_paths=False), config()])


def test_a_model_outside_the_llama_family_is_refused_with_a_message(tmp_path, tiny_model_dir):
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=53, n_embd=32, n_layer=1, n_head=2))
    folder = str(tmp_path / "gpt2")
    model.save_pretrained(folder)
    transformers.AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    cfg = config(model_path=folder)
    with pytest.raises(ValueError, match="a gpt2 model is trained one seed per process"):
        train_group([Seed(cfg, str(tmp_path / "a"), NullSink()), Seed(cfg, str(tmp_path / "b"), NullSink())])


def test_the_command_line_trains_seeds_packed_into_their_own_folders(tmp_path):
    cfg = tmp_path / "run.json"
    cfg.write_text(json.dumps({"preset": "dapo", "total_steps": 2, "prompts_per_step": 4, "group_size": 4}))
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-m", "training", "run", str(cfg), "--seeds", "0,4", "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(line["seed"], line["status"], line["step"]) for line in lines] == [(0, "succeeded", 2), (4, "succeeded", 2)]
    for n in (0, 4):
        folder = tmp_path / "out" / f"seed_{n}"
        assert json.loads((folder / "config.json").read_text())["seed"] == n
        assert len((folder / "metrics.jsonl").read_text().splitlines()) == 2
        assert (folder / "checkpoints" / "step_000002" / "model.safetensors").is_file()
    for seeds, said in (("0,0", "--seeds: each seed once; 0 appear more than once"),
                        ("0,,1", "--seeds: expected seeds as integers separated by commas"),
                        (",".join(map(str, range(17))), "--seeds: between 1 and 16 seeds")):
        bad = subprocess.run([sys.executable, "-m", "training", "run", str(cfg), "--seeds", seeds, "--out",
                              str(tmp_path / "bad")], capture_output=True, text=True, env=env, timeout=300)
        assert bad.returncode != 0 and said in bad.stderr, (seeds, bad.stderr[-500:])
    bad = subprocess.run([sys.executable, "-m", "training", "run", str(cfg), "--seeds", "1,2", "--set", "seed=5",
                          "--out", str(tmp_path / "bad")], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode != 0 and "--seeds: give the seeds in --seeds alone" in bad.stderr
    assert not (tmp_path / "bad").exists()  # refused before anything was written


def test_an_error_in_one_seeds_own_part_of_a_step_names_that_seed(tmp_path, monkeypatch):
    """A packed seed's verifier that breaks fails the step with an error naming that seed (``member_seed``), so
    the worker fails that run alone (``workers.packed.blame_one``)."""
    import training.loop as loop

    real, built = loop.build_reward, []

    def build(spec):
        built.append(real(spec))
        if len(built) == 2:  # the second seed's verifiers
            def broken(texts, examples):
                raise ValueError("its verifier broke")
            return broken
        return built[-1]

    monkeypatch.setattr(loop, "build_reward", build)
    seeds = [Seed(config(seed=n), str(tmp_path / str(n)), NullSink()) for n in (0, 1)]
    with pytest.raises(ValueError, match="its verifier broke") as caught:
        train_group(seeds)
    assert caught.value.member_seed is seeds[1]
