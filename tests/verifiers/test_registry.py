"""Registry, simple verifiers, batch scoring and hybrid rewards."""
import math
import sys
import textwrap

import pytest

from training.verifiers import (
    VerifierError, VerifierResult, combine_rewards, get_verifier, register_verifier, score_batch,
)


def test_exact_strips_and_compares():
    v = get_verifier("exact")
    assert v(" 12 \n", {"answer": "12"}).score == 1.0
    assert v("12.0", {"answer": "12"}).score == 0.0
    assert get_verifier("exact", case_sensitive=False)("YES", {"answer": "yes"}).score == 1.0


def test_exact_missing_answer_is_verifier_error():
    with pytest.raises(VerifierError, match="answer"):
        get_verifier("exact")("1", {"gold": "1"})


def test_regex_param_and_example_pattern():
    assert get_verifier("regex", pattern=r"\bcat\b")("a cat sat", {}).score == 1.0
    assert get_verifier("regex", pattern=r"\bcat\b")("concatenate", {}).score == 0.0
    assert get_verifier("regex", mode="fullmatch")(" 17 ", {"pattern": r"\d+"}).score == 1.0
    assert get_verifier("regex", flags="i", pattern="abc")("ABC", {}).score == 1.0
    with pytest.raises(ValueError, match="flag"):
        get_verifier("regex", flags="q", pattern="a")("a", {})


def test_unknown_verifier_and_unknown_param_are_named():
    with pytest.raises(ValueError, match="unknown verifier 'nope'"):
        get_verifier("nope")
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['bogus'\]"):
        get_verifier("exact", bogus=1)


def test_register_by_decorator_and_dotted_path(tmp_path, monkeypatch):
    @register_verifier("_test_len")
    def by_length(completion, example, *, limit=3):
        return VerifierResult(1.0 if len(completion) <= limit else 0.0, {"len": len(completion)})

    assert get_verifier("_test_len", limit=5)("abcd", {}).score == 1.0
    assert get_verifier("_test_len")("abcd", {}).score == 0.0

    (tmp_path / "my_rewards.py").write_text(textwrap.dedent("""
        from training.verifiers import VerifierResult
        def has_please(completion, example, *, word="please"):
            return VerifierResult(float(word in completion), {})
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match="only name a module the operator allows"):
        get_verifier("my_rewards:has_please")  # not allowed yet: nothing imported
    assert "my_rewards" not in sys.modules
    monkeypatch.setenv("SEEDBED_VERIFIER_MODULES", "my_rewards, no_such_module_xyz")
    v = get_verifier("my_rewards:has_please", word="thanks")
    assert v("thanks!", {}).score == 1.0
    assert v("please", {}).score == 0.0
    with pytest.raises(ValueError, match="no attribute 'missing'"):
        get_verifier("my_rewards:missing")
    with pytest.raises(ValueError, match="cannot import"):
        get_verifier("no_such_module_xyz:fn")
    sys.modules.pop("my_rewards", None)


def test_score_batch_keeps_errors_per_item():
    @register_verifier("_test_flaky")
    def flaky(completion, example):
        if completion == "boom":
            raise VerifierError("server down")
        return VerifierResult(1.0, {})

    out = score_batch(get_verifier("_test_flaky"), ["a", "boom", "b"], [{}, {}, {}])
    assert isinstance(out[1], VerifierError) and [r.score for r in (out[0], out[2])] == [1.0, 1.0]


def test_combine_rewards_weights_metrics_and_errors():
    @register_verifier("_test_err_on_x")
    def err_on_x(completion, example):
        if completion == "x":
            raise VerifierError("cannot judge x")
        return VerifierResult(0.5, {})

    spec = [{"name": "exact", "weight": 1.0}, {"name": "_test_err_on_x", "weight": 0.2},
            {"name": "exact", "weight": 2.0, "params": {"case_sensitive": False}}]
    rb = combine_rewards(spec, ["A", "x", "b"], [{"answer": "a"}, {"answer": "x"}, {"answer": "a"}])
    assert rb.totals == pytest.approx([0.1 + 2.0, 1.0 + 2.0, 0.1])
    assert rb.failed == [False, True, False] and rb.errors == 1
    m = rb.metrics()
    assert m["reward/exact/mean"] == pytest.approx(1 / 3)
    assert m["reward/exact_2/mean"] == pytest.approx(2 / 3)
    assert m["reward/_test_err_on_x/mean"] == pytest.approx(0.5)
    assert m["verifier/errors"] == 1.0
    assert rb.details[1]["_test_err_on_x"] == {"error": "cannot judge x"}


def test_combine_rewards_rejects_bad_spec_naming_item():
    with pytest.raises(ValueError, match=r"rewards\[1\].weight"):
        combine_rewards([{"name": "exact"}, {"name": "exact", "weight": "big"}], ["a"], [{"answer": "a"}])
    with pytest.raises(ValueError, match=r"rewards\[0\]: unknown keys \['wieght'\]"):
        combine_rewards([{"name": "exact", "wieght": 1}], ["a"], [{"answer": "a"}])
    with pytest.raises(ValueError, match="empty"):
        combine_rewards([], [], [])
    assert math.isnan(combine_rewards([{"name": "exact"}], [], []).metrics()["reward/exact/mean"])


@pytest.mark.parametrize("name", ["subprocess:Popen", "builtins:eval", "os:system", "training.verifiers.registry:_resolve"])
def test_a_reward_spec_cannot_name_arbitrary_code(name, tmp_path, monkeypatch):
    """The registry exploit a red team found: a dotted path to any importable callable. Refused at submit (a field error) and
    when built (the worker), unless the operator allows its module; nothing runs."""
    from training.config import TrainConfig
    from training.fields import FieldErrors

    monkeypatch.delenv("SEEDBED_VERIFIER_MODULES", raising=False)
    marker = tmp_path / "ran"
    spec = [{"name": name, "params": {"args": f"touch {marker}", "shell": True}}]
    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": spec}, check_paths=False)
    assert "operator allows" in info.value.errors["rewards"]
    with pytest.raises(ValueError, match="operator allows"):
        get_verifier(name, **spec[0]["params"])
    assert not marker.exists()


@pytest.mark.parametrize("item, message", [
    ({"name": "code", "params": {"user": "root"}}, "unknown parameter(s) ['user']"),  # the sandbox's user
    ({"name": "code", "params": {"use_bwrap": "never"}}, "unknown parameter(s) ['use_bwrap']"),  # no sandbox
    ({"name": "code", "params": {"timeout_s": 1e9}}, "timeout_s must lie in [0.1, 300]"),
    ({"name": "code", "params": {"memory_mb": "lots"}}, "memory_mb must be an integer"),
    ({"name": "math", "params": {"processes": 10**6}}, "processes must lie in [1, 32]"),
    ({"name": "math", "params": {"deadline_s": float("nan")}}, "deadline_s must be a finite number"),
    ({"name": "math", "params": {"timeout_s": 20, "deadline_s": 10}}, "deadline_s must exceed timeout_s"),
    ({"name": "exact", "params": {"case_sensitive": "no"}}, "case_sensitive must be true or false"),
    ({"name": "regex", "params": {"mode": "match"}}, "mode must be one of search, fullmatch"),
    ({"name": "regex", "params": {"pattern": "a" * 5000}}, "pattern at most 1000 characters"),
    ({"name": "judge", "params": {"endpoint": "g", "base_url": "file:///etc/shadow"}}, "unknown parameter(s) ['base_url']"),
    ({"name": "judge", "params": {"endpoint": "g", "api_key_env": "DJANGO_SECRET_KEY"}}, "unknown parameter(s) ['api_key_env']"),
    ({"name": "judge", "params": {"endpoint": "g", "concurrency": 10**4}}, "concurrency must lie in [1, 64]"),
    ({"name": "ifeval", "params": {"constraints_key": ["a"]}}, "constraints_key must be a string"),
])
def test_every_verifier_parameter_is_declared_and_bounded(item, message):
    """Verifiers declare what a config may set (training.verifiers.base.Param): anything else, a wrong type or a
    value out of bounds is a field error on `rewards` at submit time, never a crash (or a root shell) later."""
    from training.config import TrainConfig
    from training.fields import FieldErrors

    with pytest.raises(FieldErrors) as info:
        TrainConfig.from_dict({"rewards": [item]}, check_paths=False)
    assert message in info.value.errors["rewards"], info.value.errors


THROWAWAY = '''
from training.verifiers.base import Param, VerifierResult, register_verifier


@register_verifier("throwaway")
def throwaway(completion, example, *, word: str = "yes"):
    return VerifierResult(float(word in completion), {})


throwaway.PARAMS = {"word": Param(str, max_len=20, help="the word that earns the reward")}
'''


def test_a_new_verifier_is_one_module_of_the_package(tmp_path, monkeypatch):
    """A module beside the built-in verifiers that registers one is found by the registry's walk and offered (the
    reward check, the run form's help, a built reward): nothing else names it."""
    import training.verifiers as package
    from training.verifiers import base
    from training.verifiers.registry import check_reward_spec, registered_names, verifier_params_help

    (tmp_path / "throwaway_reward.py").write_text(THROWAWAY)
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(tmp_path)])
    monkeypatch.delitem(sys.modules, "training.verifiers.throwaway_reward", raising=False)
    try:
        assert "throwaway" in registered_names()
        assert check_reward_spec([{"name": "throwaway", "params": {"word": "ok"}}]) == ""
        assert "'wrd'" in check_reward_spec([{"name": "throwaway", "params": {"wrd": "ok"}}])
        assert "throwaway: word — the word that earns the reward" in verifier_params_help()
        assert get_verifier("throwaway", word="ok")("ok then", {}).score == 1.0

        from webapp.runs.forms import RunForm

        assert "throwaway: word" in str(RunForm().fields["rewards"].help_text)
    finally:
        sys.modules.pop("training.verifiers.throwaway_reward", None)
        base.VERIFIER_REGISTRY.pop("throwaway", None)
