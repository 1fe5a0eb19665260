import json

import pytest

from training.config import PRESETS, TrainConfig, field_specs
from training.fields import FieldErrors


@pytest.mark.parametrize("data,field", [
    ({"eps_low": 0.2, "eps_high": 0.1}, "eps_high"),
    ({"group_size": 1}, "group_size"),
    ({"lr": -1e-4}, "lr"),
    ({"lr": 0}, "lr"),
    ({"top_p": 0}, "top_p"),
    ({"top_p": 1.5}, "top_p"),
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 4, "overlong_buffer_len": 4}, "overlong_buffer_len"),
    ({"preset": "ppo"}, "preset"),
    ({"seed": "abc"}, "seed"),
    ({"learning_rate": 1e-3}, "learning_rate"),
    ({"loss_agg": "sum"}, "loss_agg"),
    ({"dual_clip": 0.5}, "dual_clip"),
    ({"task": "file"}, "data_path"),
    ({"rewards": [{"weight": 1}]}, "rewards"),
    ({"eval_k": [1, 64], "eval_n": 8}, "eval_k"),
])
def test_bad_values_name_the_field(data, field, tiny_model_dir):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict(data)
    assert field in info.value.errors, info.value.errors
    assert field in str(info.value)


def test_model_path_must_be_a_model_folder(tmp_path):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"model_path": str(tmp_path / "missing")})
    assert "no such folder" in info.value.errors["model_path"]
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"model_path": str(tmp_path)})
    assert "not a model folder" in info.value.errors["model_path"]


def test_presets_set_their_knobs_and_user_values_win(tiny_model_dir):
    dapo = TrainConfig.from_dict({"preset": "dapo"})
    assert (dapo.eps_high, dapo.loss_agg, dapo.dynamic_sampling, dapo.kl_coef) == (0.28, "token-mean", True, 0.0)
    dr = TrainConfig.from_dict({"preset": "dr_grpo"})
    assert (dr.norm_adv_by_std, dr.loss_agg) == (False, "seq-mean-token-sum-norm")
    grpo = TrainConfig.from_dict({"preset": "grpo", "kl_coef": 0.0})
    assert grpo.kl_coef == 0.0 and grpo.loss_agg == "seq-mean-token-mean"
    assert set(PRESETS) == {"grpo", "dapo", "dr_grpo"}


def test_form_strings_are_coerced(tiny_model_dir):
    cfg = TrainConfig.from_dict({"seed": "7", "lr": "0.001", "dynamic_sampling": "on", "dual_clip": "",
                                 "eval_k": "[1, 2]"})
    assert (cfg.seed, cfg.lr, cfg.dynamic_sampling, cfg.dual_clip, cfg.eval_k) == (7, 1e-3, True, None, [1, 2])


def test_yaml_round_trip(tmp_path, tiny_model_dir):
    path = tmp_path / "c.yaml"
    path.write_text("preset: dapo\nseed: 3\ngroup_size: 4\n")
    cfg = TrainConfig.from_file(str(path))
    again = TrainConfig.from_dict(json.loads(cfg.to_json()))
    assert again == cfg and cfg.seed == 3 and cfg.group_size == 4


def test_every_knob_has_help_text():
    specs = field_specs()
    assert len(specs) >= 40
    for spec in specs:
        assert len(spec["help"]) > 15, spec["name"]
        if spec["kind"] == "choice":
            assert spec["default"] in spec["choices"]


def test_vllm_cannot_keep_sampling_masks(tiny_model_dir):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rollout_engine": "vllm", "keep_sampling_mask": True})
    assert "rollout_engine" in info.value.errors


def test_the_field_defaults_are_the_defaults_and_presets_only_override(tiny_model_dir):
    """One source for defaults: TrainConfig() is what an empty config gives, and that is the grpo preset."""
    assert TrainConfig() == TrainConfig.from_dict({}) == TrainConfig.from_dict({"preset": "grpo"})
    assert PRESETS["grpo"] == {}
    defaults = TrainConfig().to_dict()
    for name, knobs in PRESETS.items():
        assert knobs and all(defaults[k] != v for k, v in knobs.items()) or name == "grpo", name


@pytest.mark.parametrize("knob, value", [
    ("lr", float("nan")), ("lr", float("inf")), ("temperature", "nan"), ("eps_high", "-inf"),
    ("group_size", 10**9), ("total_steps", 10**7), ("prompts_per_step", 0), ("top_p", 1.5), ("seed", -1),
    ("eval_k", list(range(1, 40))), ("rewards", [{"name": "exact"}] * 17),
])
def test_every_number_is_finite_and_bounded_before_any_work(knob, value, tiny_model_dir):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({knob: value})
    assert set(info.value.errors) == {knob}, info.value.errors


def test_ranges_live_in_the_field_metadata_that_the_form_reads():
    specs = {s["name"]: s for s in field_specs()}
    assert specs["group_size"]["range"] == "in [2, 1024]" and specs["group_size"]["bounds"] == {"min": 2, "max": 1024}
    assert specs["lr"]["range"] == "in (0, 1]"
    assert specs["dual_clip"]["range"] == "in (1, 100]"
    assert specs["preset"]["range"] == ""


@pytest.mark.parametrize("rewards, message", [
    ([{"name": "maths"}], "unknown verifier 'maths'"),
    ([{"name": "math", "params": {"answer_kye": "x"}}], "unknown parameter(s) ['answer_kye']"),
    ([{"name": "exact", "weight": float("nan")}], "weight must be a finite number"),
    ([{"name": "exact", "params": []}], "params must be a mapping"),
])
def test_the_reward_spec_is_checked_with_the_registry_names_and_parameters(rewards, message, tiny_model_dir):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": rewards})
    assert message in info.value.errors["rewards"]


@pytest.mark.parametrize("stop, message", [
    ("</answer>", "expected a JSON list"),  # form text that is not JSON
    ({"a": 1}, "expected a list"),
    (["a", "b", "c", "d", "e"], "at most 4 stop strings; got 5"),
    (["x" * 33], "item 0 must be 1 to 32 characters; got 33"),
    (["</answer>", ""], "item 1 must be 1 to 32 characters; got 0"),
    (["ok", 7], "item 1 must be a string; got 7"),
])
def test_stop_strings_are_bounded_and_named(stop, message):
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"stop": stop}, check_paths=False)
    assert set(info.value.errors) == {"stop"} and message in info.value.errors["stop"], info.value.errors


def test_stop_strings_reach_the_prompt_template():
    assert TrainConfig().stop == [] and TrainConfig().prompt_template().stop == ()
    cfg = TrainConfig.from_dict({"stop": '["</answer>", "\\n\\nQuestion:"]'}, check_paths=False)  # a form's text
    assert cfg.stop == ["</answer>", "\n\nQuestion:"]
    template = cfg.prompt_template()
    assert template.stop == ("</answer>", "\n\nQuestion:")
    # stored with an evaluation job as a dict, and read back the same
    assert type(template).from_dict(json.loads(json.dumps(template.to_dict()))) == template
    assert {s["name"]: s for s in field_specs()}["stop"]["kind"] == "json"
