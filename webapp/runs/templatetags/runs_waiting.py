"""``{% queue_reason run user as why %}``: what a queued run waits for, as its viewer may see it
(webapp/runs/waiting.py), for the run page's live part (templates/runs/_run_state.html); ``run|build_wait``:
"waiting: the built-in model is being built (...)" while a worker holds the run but its first step waits for that
build (``waiting.build_wait``: a display state, its status stays running), "" otherwise (templates/runs/_status.html)."""
from django import template

from webapp.runs.waiting import build_waits, queue_reasons

register = template.Library()


@register.simple_tag
def queue_reason(run, user) -> str:
    return queue_reasons(runs=[run], viewer=user).get(run.pk, "")


@register.filter
def build_wait(run) -> str:
    return build_waits([run]).get(run.pk, "")
