"""The recorded early-stopping corpus (bench/curves/real): its files are what bench/record_curves.py
writes and bench/early_stopping.py reads, and it has the shape the benchmark's real set promises."""
from __future__ import annotations

import glob
import gzip
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import early_stopping  # noqa: E402
import record_curves  # noqa: E402
from record_curves import CORPUS, LEGACY_CORPUS, load_sweep, round_sig, write_sweep  # noqa: E402

CORPUS_FILES = sorted(glob.glob(os.path.join(CORPUS, "*.json.gz")))


def test_values_are_kept_to_four_significant_digits():
    assert round_sig(0.123456) == 0.1235 and round_sig(123456.0) == 123500.0 and round_sig(-0.00098765) == -0.0009877
    assert round_sig(0.0) == 0.0 and round_sig(float("nan")) is None and round_sig(None) is None


def test_a_sweep_file_round_trips_and_is_deterministic(tmp_path):
    data = {"format": record_curves.FORMAT, "sweep": "s", "config": {"lr": 1e-4}, "steps": 3, "seeds": 2,
            "seconds": 1.0, "metrics": ["reward/mean", "entropy"],
            "runs": {"seed-0": {"reward/mean": [0.1, None, 0.3], "entropy": [1.0, 0.9, 0.8]},
                     "seed-1": {"reward/mean": [0.2, 0.2, 0.25], "entropy": [1.1, 1.0, 0.7]}}}
    a, b = tmp_path / "a.json.gz", tmp_path / "b.json.gz"
    write_sweep(str(a), data)
    write_sweep(str(b), data)
    assert a.read_bytes() == b.read_bytes()  # mtime 0: the same curves, the same bytes
    assert load_sweep(str(a)) == data and not (tmp_path / "a.json.gz.part").exists()
    sweeps = early_stopping.real_sweeps("reward/mean", str(tmp_path))
    assert [s.name for s in sweeps] == ["s", "s"]
    assert sweeps[0]["seed-0"] == [(1, 0.1), (3, 0.3)]  # a null is a step that did not log the metric
    assert sweeps[0].others["entropy"]["seed-1"] == [(1, 1.1), (2, 1.0), (3, 0.7)]
    assert early_stopping.real_sweeps("kl", str(tmp_path)) == []  # a sweep without the metric is left out


def test_an_old_plain_file_is_refused_with_the_way_to_convert_it(tmp_path):
    path = tmp_path / "old.json.gz"
    with gzip.open(path, "wt") as fh:
        json.dump({"sweep": "old", "runs": {}}, fh)
    with pytest.raises(ValueError, match="--convert-legacy"):
        load_sweep(str(path))


def test_every_recorded_sweep_has_its_seeds_steps_and_metrics():
    assert CORPUS_FILES, "bench/curves/real is empty: run bench/record_curves.py"
    for path in CORPUS_FILES:
        data = load_sweep(path)
        assert os.path.basename(path) == f"{data['sweep']}.json.gz"
        assert data["sweep"] in record_curves.SWEEPS, f"{path}: not a sweep record_curves.py can record again"
        assert data["config"] == {**record_curves.BASE, **record_curves.SWEEPS[data["sweep"]]}
        assert data["seeds"] == len(data["runs"]) >= 8 and data["steps"] >= 100, path
        assert set(data["metrics"]) == set(record_curves.METRICS), path
        for seed, series in data["runs"].items():
            for metric in record_curves.METRICS:
                values = series[metric]
                assert len(values) == data["steps"], (path, seed, metric)
                assert all(v is None or round_sig(v) == v for v in values), (path, seed, metric)
                # Every step logs its rollouts' metrics; a step without an update (DAPO's dynamic sampling found
                # no group with reward variance) logs no entropy, and a run without a reference model no KL.
                if metric not in ("entropy", "kl"):
                    assert None not in values, (path, seed, metric)
            assert (None in series["kl"]) == (data["config"].get("kl_coef", 0.04) == 0
                                               or data["config"]["preset"] != "grpo"), (path, seed)
            assert None not in series["entropy"] or data["config"]["preset"] == "dapo", (path, seed)
            assert all(0.0 <= v <= 1.0 for m in ("accuracy", "length/clipped_frac", "frac_zero_std_groups")
                       for v in series[m]), (path, seed)


def test_the_corpus_spans_presets_tasks_and_learning_rates():
    configs = [load_sweep(path)["config"] for path in CORPUS_FILES]
    assert len(configs) >= 30
    assert {c["preset"] for c in configs} == {"grpo", "dapo", "dr_grpo"}
    assert any(c["task"].startswith("reasoning_gym:") for c in configs)
    assert len({c["lr"] for c in configs}) >= 4


def test_the_legacy_corpus_was_converted_whole():
    sweeps = early_stopping.real_sweeps("reward/mean", LEGACY_CORPUS)
    assert len(sweeps) == 10 and all(len(s) == 8 and all(len(c) == 40 for c in s.values()) for s in sweeps)
