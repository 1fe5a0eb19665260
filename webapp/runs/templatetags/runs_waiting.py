"""``{% queue_reason run user as why %}``: what a queued run waits for, as its viewer may see it
(webapp/runs/waiting.py), for the run page's live part (templates/runs/_run_state.html)."""
from django import template

from webapp.runs.waiting import queue_reasons

register = template.Library()


@register.simple_tag
def queue_reason(run, user) -> str:
    return queue_reasons(runs=[run], viewer=user).get(run.pk, "")
