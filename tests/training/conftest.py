"""Helpers of the training-core tests (the ``tiny_model_dir`` fixture comes from tests/conftest.py)."""
from tests.conftest import REPO  # noqa: F401  (re-exported for the CLI tests)
from training.sink import NullSink


def small_config(**overrides):
    from training.config import TrainConfig
    base = {"preset": "dapo", "total_steps": 4, "prompts_per_step": 4, "group_size": 4, "max_new_tokens": 6,
            "samples_per_step": 2}
    base.update(overrides)
    return TrainConfig.from_dict(base)


class ListSink(NullSink):
    """Keeps everything the loop emits, in memory."""

    def __init__(self):
        self.metrics, self.samples, self.checkpoints, self.logs = [], [], [], []

    def truncate_after(self, step):
        self.metrics = [(s, m) for s, m in self.metrics if s <= step]

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
