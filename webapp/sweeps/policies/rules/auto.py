"""``auto``: bayes or a one-shot cut, whichever the project's history says; the rule and its policy are ``policies.auto``."""
from __future__ import annotations

from ..auto import AutoPolicy, auto_stops, auto_waiting
from ..parameters import AutoParams
from ..policy import Rule


RULE = Rule("auto", AutoParams, auto_stops, AutoPolicy, auto_waiting, compares=True)
