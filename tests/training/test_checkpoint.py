"""A checkpoint's trainer state is loaded without pickle: a planted object cannot run code on resume."""
from __future__ import annotations

import os
import pickle

import pytest
import torch

from training.checkpoint import load_trainer_state


class _Planted:
    """What a hostile trainer_state.pt could hold: unpickling it would create a marker file."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_a_planted_pickle_in_the_trainer_state_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    torch.save({"step": 3, "optimizer": _Planted(str(marker))}, tmp_path / "trainer_state.pt")
    with pytest.raises(pickle.UnpicklingError):
        load_trainer_state(str(tmp_path), model=None, optimizer=None, scheduler=None, generators={})
    assert not marker.exists()
    assert os.listdir(tmp_path) == ["trainer_state.pt"]


def test_checkpoints_the_run_never_recorded_are_discarded(tmp_path):
    from training.checkpoint import checkpoint_dir, discard_checkpoints_except

    for step in (2, 4, 6):
        os.makedirs(os.path.join(checkpoint_dir(str(tmp_path)), f"step_{step:06d}"))
    os.makedirs(os.path.join(checkpoint_dir(str(tmp_path)), "notes"))
    assert discard_checkpoints_except(str(tmp_path), [4]) == [2, 6]
    assert sorted(os.listdir(checkpoint_dir(str(tmp_path)))) == ["notes", "step_000004"]
    assert discard_checkpoints_except(str(tmp_path / "none"), []) == []
