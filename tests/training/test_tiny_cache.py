"""The built-in tiny model's build cache (docs/architecture.md#tests-and-benchmarks): a clean clone on a machine that
built the same recipe copies that build instead of training it again; a fresh machine, or a changed recipe,
builds. The builds here are stand-ins that write a model folder the way ``bootstrap_tiny`` does (its real build is
tested in test_tiny_build.py); one test runs the set-up's own command, ``python -m training bootstrap-tiny``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import training.tiny as tiny
from tests.conftest import REPO
from training.models import atomic_folder


@pytest.fixture
def builds(monkeypatch):
    """Replaces the real build with one that writes a model folder and counts the builds it made."""
    made = []

    def fake_bootstrap(out_dir, *, log=print, progress=None, **build):
        made.append(out_dir)
        info = {"task": build.get("task", "arithmetic"), "sft_steps": 25, "pass@1": 0.2, "build": len(made)}
        with atomic_folder(out_dir, prefix=tiny._STAGING_PREFIX) as staging:
            for name in ("config.json", "model.safetensors", "tokenizer.json"):
                with open(os.path.join(staging, name), "w") as fh:
                    fh.write(f"{name} of build {len(made)}")
            with open(os.path.join(staging, tiny.READY_FILE), "w") as fh:
                json.dump(info, fh)
        return info

    monkeypatch.setattr(tiny, "bootstrap_tiny", fake_bootstrap)
    monkeypatch.setenv("SEEDBED_TINY_SHIPPED", "off")  # (the shipped build would be copied first)
    return made


def files_of(folder) -> dict:
    return {name: open(os.path.join(folder, name)).read() for name in sorted(os.listdir(folder))}


def quiet(_line):
    pass


def test_a_fresh_machine_builds_and_the_next_clean_clone_copies_that_build(tmp_path, builds):
    cache = str(tmp_path / "cache")
    first, second = str(tmp_path / "clone1" / "tiny"), str(tmp_path / "clone2" / "tiny")
    info = tiny.ensure_tiny_model(first, log=quiet, cache_root=cache, task="arithmetic", seed=0)
    assert builds == [first] and "cached" not in info
    [key] = os.listdir(cache)
    assert key == tiny.tiny_recipe_digest({"task": "arithmetic", "seed": 0})
    assert files_of(os.path.join(cache, key)) == files_of(first)

    lines = []
    info = tiny.ensure_tiny_model(second, log=lines.append, cache_root=cache, task="arithmetic", seed=0)
    assert builds == [first], "the second clone built again instead of copying"
    assert info["cached"] == os.path.join(cache, key) and info["build"] == 1
    assert files_of(second) == files_of(first) and tiny.tiny_model_ready(second)
    assert any("in the cache" in line for line in lines), lines
    assert not [name for name in os.listdir(tmp_path / "clone2") if name.startswith(tiny._STAGING_PREFIX)]


def test_without_a_cache_every_clone_builds(tmp_path, builds):
    for clone in ("clone1", "clone2"):
        tiny.ensure_tiny_model(str(tmp_path / clone / "tiny"), log=quiet, cache_root=None)
    assert len(builds) == 2


def test_a_changed_recipe_or_other_build_arguments_are_built_afresh(tmp_path, builds, monkeypatch):
    """A recipe module whose source changes (here a stand-in module appended to the recipe) gets another key."""
    module = tmp_path / "lib" / "stand_in_recipe_step.py"
    module.parent.mkdir()
    module.write_text("WARM_UP_STEPS = 25\n")
    monkeypatch.syspath_prepend(str(module.parent))
    digest = tiny.tiny_recipe_digest
    monkeypatch.setattr(tiny, "tiny_recipe_digest", lambda build: digest(
        build, modules=(*tiny.TINY_RECIPE_MODULES, "stand_in_recipe_step")))
    cache = str(tmp_path / "cache")

    tiny.ensure_tiny_model(str(tmp_path / "a" / "tiny"), log=quiet, cache_root=cache, seed=0)
    tiny.ensure_tiny_model(str(tmp_path / "b" / "tiny"), log=quiet, cache_root=cache, seed=0)
    assert len(builds) == 1
    module.write_text("WARM_UP_STEPS = 50\n")
    info = tiny.ensure_tiny_model(str(tmp_path / "c" / "tiny"), log=quiet, cache_root=cache, seed=0)
    assert len(builds) == 2 and "cached" not in info
    tiny.ensure_tiny_model(str(tmp_path / "d" / "tiny"), log=quiet, cache_root=cache, seed=1)
    assert len(builds) == 3 and len(os.listdir(cache)) == 3


def test_the_cache_root_is_the_users_cache_unless_set_or_off(monkeypatch, tmp_path):
    monkeypatch.delenv("SEEDBED_TINY_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert tiny.tiny_cache_root() == str(tmp_path / "seedbed" / "tiny-models")
    monkeypatch.setenv("SEEDBED_TINY_CACHE", str(tmp_path / "elsewhere"))
    assert tiny.tiny_cache_root() == str(tmp_path / "elsewhere")
    monkeypatch.setenv("SEEDBED_TINY_CACHE", "off")
    assert tiny.tiny_cache_root() is None


def test_the_recipe_holds_every_training_module_a_build_loads(tmp_path):
    """In a fresh interpreter, a build cut to no warm-up step plus one held-out check as the build makes it: every
    module of the training core they loaded is hashed."""
    code = textwrap.dedent("""
        import json, sys
        from training.data import HELD_OUT_OFFSET
        from training.tasks.arithmetic import arithmetic_example
        from training.tiny import bootstrap_tiny, build_model, build_tokenizer
        bootstrap_tiny(sys.argv[1], max_steps=0, band=(0.0, 1.0), log=lambda s: None)
        from training.evaluate import evaluate_examples
        tokenizer = build_tokenizer()
        evaluate_examples(build_model(tokenizer), tokenizer, [arithmetic_example(HELD_OUT_OFFSET)], n=1,
                          ks=[1], temperature=1.0, max_new_tokens=2, rewards=[{"name": "exact"}], seed=0)
        print(json.dumps(sorted(m for m in sys.modules if m == "training" or m.startswith("training."))))
    """)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "tiny")], cwd=REPO, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    loaded = set(json.loads(done.stdout.strip().splitlines()[-1]))
    assert loaded - set(tiny.TINY_RECIPE_MODULES) == set(), "add these to TINY_RECIPE_MODULES"


def test_the_set_up_command_copies_a_cached_build_of_its_recipe(tmp_path):
    """``./seedbed test`` runs ``python -m training bootstrap-tiny --out var/models/tiny``: with a build of the same
    recipe in the cache it copies it (a stand-in here: had it built, the files would differ) and says so."""
    cache = tmp_path / "cache"
    cached = cache / tiny.tiny_recipe_digest({"task": "arithmetic", "seed": 0})
    cached.mkdir(parents=True)
    (cached / "config.json").write_text("{}")
    (cached / "model.safetensors").write_text("the cached weights")
    (cached / tiny.READY_FILE).write_text(json.dumps({"task": "arithmetic", "sft_steps": 75, "pass@1": 0.2}))
    out = tmp_path / "clone" / "var" / "models" / "tiny"
    done = subprocess.run([sys.executable, "-m", "training", "bootstrap-tiny", "--out", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO), "SEEDBED_TINY_CACHE": str(cache),
                               "SEEDBED_TINY_SHIPPED": "off"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert "in the cache" in done.stderr
    assert files_of(out) == files_of(cached)
    assert json.loads(done.stdout)["cached"] == str(cached)
