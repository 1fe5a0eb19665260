"""The start of a rank that torchrun launched for a run (docs/architecture.md#engines-and-distribution): TRL's
(``training.engines.entry.trl``) or Seedbed's own (``training.engines.seedbed``)."""
from __future__ import annotations

import json
import os

from training.engines.process import die_with_parent


def rank_setup(out_dir: str):
    """It dies with torchrun's agent (no orphaned ranks), takes the threads its supervisor gave it, and reads the
    run's config from the folder (``seedbed_config.json``, written by the supervisor). Returns the TrainConfig."""
    import torch

    from training.config import TrainConfig

    die_with_parent()
    with open(os.path.join(out_dir, "seedbed_config.json"), encoding="utf-8") as fh:
        cfg = TrainConfig.from_dict(json.load(fh), check_paths=False)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    return cfg
