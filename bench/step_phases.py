"""Where a training run's time goes, phase by phase, for the benchmarks (bench/trl_compare.py, bench/real_model.py).

A ``PhaseClock`` replaces functions and methods by timed wrappers while it is entered (nothing in the training
code knows about it) and keeps, per phase, the *exclusive* seconds of its calls: a call's time minus the time of
the timed calls made inside it, so the phases add up to the timed run without counting anything twice (the
backward inside the update is "backward", not also "loss"). ``seedbed_phases`` names what Seedbed's loop does
(docs/architecture.md, "The training core"); ``trl_phases`` the same phases in TRL's GRPOTrainer.
"""
from __future__ import annotations

import functools
import time
from collections import defaultdict

#: the phases in the order a report lists them, each with what it holds
PHASES = {
    "setup": "loading the model and tokenizer, the task, the engine (once a run)",
    "generate": "sampling the completions",
    "score": "decoding, verifiers, advantages and the step's rollout statistics",
    "old log-probs": "a forward without gradients over the batch (reference or old policy)",
    "forward": "the training forward (log-probs, entropy)",
    "backward": "autograd's backward",
    "loss": "the loss and its statistics around forward and backward",
    "optimizer": "gradient clipping and the optimizer step",
    "logging": "metrics, samples and signals to the sink or the logger",
    "checkpoint": "saving checkpoints",
    "other": "the rest of the timed call (loop bookkeeping, the scheduler, weight sync)",
}


_INHERITED = object()  # marks an attribute a class inherits rather than defines


class PhaseClock:
    """Exclusive seconds per phase of the wrapped calls made while the clock is entered.

    ``targets``: (owner, attribute name, phase) triples; the owner is a module or a class, and its attribute is
    replaced by a wrapper for the duration of the ``with`` block (restored afterwards, whatever happens).
    """

    def __init__(self, targets):
        self.targets = list(targets)
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # per active call: [phase, seconds of the timed calls inside it]
        self._saved: list = []

    def timed(self, fn, phase):
        """``fn`` wrapped: its exclusive time goes to ``phase`` (a name, or a function of nothing that names the
        phase at call time, e.g. by whether gradients are on)."""
        clock = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            frame = [phase() if callable(phase) else phase, 0.0]
            clock._stack.append(frame)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - t0
                clock._stack.pop()
                clock.seconds[frame[0]] += elapsed - frame[1]
                clock.calls[frame[0]] += 1
                if clock._stack:
                    clock._stack[-1][1] += elapsed

        return wrapper

    def __enter__(self) -> "PhaseClock":
        for owner, name, phase in self.targets:
            # a class's own attribute (an inherited method is shadowed, then the shadow removed on exit)
            self._saved.append((owner, name, vars(owner).get(name, _INHERITED)))
            setattr(owner, name, self.timed(getattr(owner, name), phase))
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self._saved):
            if original is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._saved.clear()

    def wrap_sink(self, sink, phase: str = "logging"):
        """Time the ``on_*`` and ``flush`` methods of a sink object (an instance: only it is changed)."""
        for name in dir(sink):
            if name.startswith("on_") or name == "flush":
                setattr(sink, name, self.timed(getattr(sink, name), phase))
        return sink

    def table(self, steps: int, *, title: str) -> str:
        """The phases as lines: ms per step, share of the timed total, calls; then the total."""
        total = sum(self.seconds.values())
        lines = [title, f"  {'phase':<14} {'ms/step':>9} {'share':>6} {'calls':>6}  what"]
        for phase, what in PHASES.items():
            s = self.seconds.get(phase, 0.0)
            lines.append(f"  {phase:<14} {1000 * s / max(steps, 1):9.2f} {100 * s / total if total else 0:5.1f}% "
                         f"{self.calls.get(phase, 0):6d}  {what}")
        lines.append(f"  {'total':<14} {1000 * total / max(steps, 1):9.2f} {100.0 if total else 0:5.1f}%")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        """{"seconds": {phase: s}, "calls": {phase: n}} (JSON for a child process's result); ``add`` reads it."""
        return {"seconds": {p: self.seconds.get(p, 0.0) for p in PHASES},
                "calls": {p: self.calls.get(p, 0) for p in PHASES}}

    def add(self, recorded: dict) -> None:
        """Add another clock's ``as_dict`` to this one (a report over several runs)."""
        for phase, seconds in recorded["seconds"].items():
            self.seconds[phase] += seconds
        for phase, calls in recorded["calls"].items():
            self.calls[phase] += calls


def seedbed_phases():
    """The (owner, name, phase) triples of Seedbed's loop: training.loop's own functions as ``train`` calls
    them (module attributes), the hf engine's sampling, the policy's forward, autograd's backward, AdamW."""
    import torch

    import training.loop as loop
    import training.seed_group as seed_group
    from training.distributed import Parallel
    from training.rollout import HFRolloutEngine

    return [(loop, "train", "other"),
            (loop, "load_model", "setup"), (loop, "ensure_tiny_model", "setup"), (loop, "prompt_source", "setup"),
            (loop, "build_reward", "setup"), (seed_group, "make_rollout_engine", "setup"),
            (loop, "load_trainer_state", "setup"),
            (loop, "collect_group_rollouts", "score"), (HFRolloutEngine, "generate", "generate"),
            (loop, "sequence_logprobs", "old log-probs"),
            (loop, "update_group", "loss"), (Parallel, "forward", "forward"), (torch.Tensor, "backward", "backward"),
            (Parallel, "clip_grad_norm", "optimizer"), (torch.optim.AdamW, "step", "optimizer"),
            (loop, "report_signals", "logging"), (loop, "report_ranks", "logging"),
            (loop, "save_checkpoint", "checkpoint")]


def trl_phases():
    """The same phases in TRL's GRPOTrainer (``train`` is the timed call; its own set-up is before it)."""
    import torch
    from trl import GRPOTrainer

    return [(GRPOTrainer, "train", "other"),
            (GRPOTrainer, "_generate_and_score_completions", "score"), (GRPOTrainer, "_generate", "generate"),
            (GRPOTrainer, "_calculate_rewards", "score"),
            (GRPOTrainer, "compute_loss", "loss"),
            (GRPOTrainer, "_get_per_token_logps_and_entropies", lambda: "forward" if torch.is_grad_enabled()
             else "old log-probs"),
            (torch.Tensor, "backward", "backward"),
            (torch.optim.AdamW, "step", "optimizer"), (torch.nn.utils, "clip_grad_norm_", "optimizer"),
            (GRPOTrainer, "log", "logging"), (GRPOTrainer, "_save_checkpoint", "checkpoint")]
