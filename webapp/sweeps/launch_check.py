"""The sweep form's "this policy can never stop a run" warning, before launch: the check a launched sweep gets
after commit (``services.policy_note``: ``policies.feasibility`` replays an idealised sweep of its shape) asked of
the form's fields as they stand. Reads only; shown next to the policy field, and again as the fields change
(``views.sweep_policy_warning``, fetched by htmx). A field that does not parse yet gives no warning: the launch's
field errors say what is wrong with it.
"""
from __future__ import annotations

import math

from training.config import TrainConfig
from training.fields import FieldErrors
from webapp.runs import services as run_services

from . import services
from .forms import parse_json_object, parse_grid, parse_seeds


def form_policy_warning(data) -> str:
    """The feasibility note for the sweep the form's ``data`` (a POST or GET mapping, or ``copies.form_values`` of
    an unbound form) would launch: its runs (seeds x grid points), concurrency, policy and horizon; "" when the
    policy can act, is manual, or a field does not parse."""
    try:
        total_steps = int(data.get("total_steps") or TrainConfig().total_steps)
        n_runs = len(parse_seeds(data.get("seeds") or "", 0)) * math.prod(
            len(values) for values in parse_grid(data.get("grid") or "").values())
        concurrency = int(data.get("concurrency") or 1)
        policy = {**parse_json_object(data.get("policy_params") or ""), "name": data.get("policy_name") or "manual",
                  "metric": data.get("policy_metric") or "reward/mean", "mode": data.get("policy_mode") or "max"}
        config = services.policy_config_for(policy, total_steps=total_steps,
                                            free_slot_use=data.get("free_slot_use") or "",
                                            extend_steps=int(data.get("extend_steps") or 0))
        queue = run_services.queue_for(TrainConfig(device=data.get("device") or "auto",
                                                   rollout_engine=data.get("rollout_engine") or "hf"))
    except (ValueError, TypeError, FieldErrors):
        return ""
    if not 1 <= n_runs <= services.MAX_RUNS or not 1 <= concurrency:
        return ""
    try:
        return services.policy_note(config, n_runs=n_runs, concurrency=concurrency, queue=queue) or ""
    except FieldErrors:  # its search for settings that would act tried one the rule refuses (median min_peers 0)
        return ""
