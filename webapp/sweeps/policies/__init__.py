"""Early-stopping policies for seed sweeps (docs/architecture.md#early-stopping).

Pure Python, importing no Django, so a sweep can be replayed offline (``replay``, ``bench/early_stopping.py``)
and the database layer can feed a policy the curves it stores and apply what it decides. The package:
``smoothing`` and ``curves`` (each run's smoothed curve; ``SweepCurves``, what a rule reads), ``stopping_rules``
(each rule a pure function over the curves, its formula in its docstring),
``calibrated`` and ``bayes`` (the ``bayes`` rule), ``forecast_paths`` (the drawn paths), ``parameters`` (one
dataclass per policy), ``policy`` (``Policy`` and ``Rule``, what a rule declares), ``rules`` (one module per rule,
each declaring its ``RULE``), ``registry`` (``RULES``, found by walking ``rules``: a record per rule, by its name),
``simulator``, ``replay``.
Callers never test a policy's kind: ``describe()`` says what it does, ``next_check(last_step, total_steps)``
when it looks at a run next, ``waiting`` why it cannot decide about one now, ``reads_curves`` whether it needs the
curves at all, ``stored_config(policy, config)`` what a sweep keeps of its config (nothing, for manual).

    policy = make_policy({"name": "median", "metric": "reward/mean", "mode": "max", "max_steps": 40})
    policy.observe("seed-3", step=12, value=0.41)      # one call per logged point, any run order
    for decision in policy.decide():                   # each run is stopped at most once
        ...  # decision.run_id, .action ("stop" | "extend"), .reason, .rule, .step, .value, .threshold

Policies (``name``):

- ``manual``: never decides (kill buttons only).
- ``median``: median stopping rule (Golovin et al., "Google Vizier", KDD 2017): stop a run whose smoothed metric
  at step s is worse than the median of its peers' smoothed values at step s.
- ``asha``: asynchronous successive halving (Li et al., "A System for Massively Parallel Hyperparameter
  Tuning", MLSys 2020): rungs at ``min_steps * eta**k`` below ``max_steps``; at each rung only the top
  ``1/eta`` of the runs that reached it continue.
- ``threshold``: stop when the smoothed metric crosses a bound (``lower_bound`` / ``upper_bound``, e.g.
  entropy collapsing below 0.05) or has not improved by ``min_delta`` for ``patience`` steps.
- ``bayes`` (``bayes``, ``calibrated``): a promised risk. Each seed's worth (its final without noise) has a
  calibrated predictive distribution from its prefix (a drift table learned on synthetic sweeps); the seeds least
  likely to end within ``tolerance`` of the best stop while P(every near-best seed is stopped) <= ``risk``. Its
  decisions' ``details`` hold P(near-best), that loss, the forecast worth and its interval.

What every policy shares (``CommonParams``): the metric is smoothed per run (debiased EMA by default), no run is
judged before ``grace_steps``, and a comparison needs at least ``min_peers`` other runs that reached the same
step, so one noisy batch or a lonely early run does not kill a seed. ``mode`` says whether larger (``max``) or
smaller (``min``) values are better. A run is never judged at or after its final step (stopping it would
save nothing), points a run logs after its stop are ignored, and a run gets at most one stop and one
extension. ``mark_stopped(run_id)`` tells the policy about a run that ended otherwise (killed by a user).

Steps: a run with ``max_steps`` steps logs steps ``1 .. max_steps`` (the training loop's convention: step k
is the k-th completed step); points must arrive in increasing step order per run, and a repeated or older step is ignored, so the database
layer may feed the same rows twice.

Nothing is saved between checks: every live check (``webapp.sweeps.policy_check``) is a replay from scratch of
the stored curves through ``simulator``, which feeds a policy and collects its decisions, for the live check and
``replay`` alike, and feeds the dashboard's forecasts a bayes policy whose numbers they show (``bayes_numbers``).

Extensions (optional, ``extend_survivors_by: N`` > 0): every stop frees a slot; ``decide`` then proposes to
extend the best live run (highest smoothed value at its latest step, past the grace period, not extended
before) by N steps, one proposal per freed slot. The scheduler applies an extension only when the sweep has
no queued seed left (a queued seed takes a freed slot first).
"""
from __future__ import annotations

from .parameters import AshaParams, BayesParams, CommonParams, ManualParams, MedianParams, ThresholdParams
from .decision import EXTEND, STOP, Decision
from .policy import Policy, Rule
from .registry import (RULES, find_rules, make_policy, one_run_error, params_help, parse_config, replay, rule_list,
                       stored_config)
from .replay import ReplayResult
from .smoothing import debiased_ema, running_mean, smooth

__all__ = [
    "Decision", "Policy", "CommonParams", "ManualParams", "MedianParams", "AshaParams", "ThresholdParams",
    "BayesParams", "make_policy", "parse_config", "params_help", "replay", "ReplayResult", "debiased_ema",
    "running_mean", "smooth", "STOP", "EXTEND", "find_rules",
    "stored_config", "RULES", "Rule", "rule_list", "one_run_error",
]
