"""``bayes``: a promised risk; the rule and its policy are ``policies.bayes``."""
from __future__ import annotations

from ..bayes import BayesPolicy, bayes_stops, bayes_waiting
from ..parameters import BayesParams
from ..policy import Rule


RULE = Rule("bayes", BayesParams, bayes_stops, BayesPolicy, bayes_waiting, compares=True)
