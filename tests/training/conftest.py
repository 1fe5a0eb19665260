import os
import subprocess
import sys

import pytest

from training.config import default_tiny_model_dir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def tiny_model_dir():
    """The built-in tiny model; built once by the set-up command (or here, if missing)."""
    path = default_tiny_model_dir()
    if not os.path.isfile(os.path.join(path, "config.json")):
        subprocess.run([sys.executable, "-m", "training", "bootstrap-tiny", "--out", path], cwd=REPO, check=True)
    return path


def small_config(**overrides):
    from training.config import TrainConfig
    base = {"preset": "dapo", "total_steps": 4, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6,
            "samples_per_step": 2}
    base.update(overrides)
    return TrainConfig.from_dict(base)


class ListSink:
    """Keeps everything the loop emits, in memory."""

    def __init__(self):
        self.metrics, self.samples, self.checkpoints, self.logs = [], [], [], []

    def on_metrics(self, step, metrics):
        self.metrics.append((step, dict(metrics)))

    def on_samples(self, step, rows):
        self.samples.append((step, rows))

    def on_checkpoint(self, step, path):
        self.checkpoints.append((step, path))

    def on_log(self, line):
        self.logs.append(line)

    def flush(self):
        pass


TIMING_KEYS = {"step_time_s", "tokens_per_s"}


def comparable(metrics):
    """Metrics without wall-clock figures (those differ between identical runs)."""
    return [(s, {k: v for k, v in m.items() if k not in TIMING_KEYS and not k.endswith("/seconds")})
            for s, m in metrics]
