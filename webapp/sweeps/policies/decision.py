"""A policy's decisions: what a rule returns (stop or extend one run) with the numbers it used (docs/architecture.md,
"Early stopping")."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Hashable

STOP = "stop"
EXTEND = "extend"


@dataclass(frozen=True)
class Decision:
    """One decision about one run, with the numbers it used (the database stores every field).

    ``value`` is the run's smoothed metric that was compared, ``threshold`` what it was compared with (peer
    median, rung cut-off, bound or best-so-far), ``n_peers`` how many other runs the comparison used, and
    ``extra_steps`` how many steps an ``extend`` grants (0 for a stop), and ``details`` any further numbers the
    rule used, as JSON (``bayes``: the probability, the forecast and its interval, the peers' forecasts; empty
    for the other rules).
    """

    run_id: Hashable
    action: str
    reason: str
    rule: str
    step: int
    value: float
    threshold: float
    n_peers: int = 0
    extra_steps: int = 0
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

