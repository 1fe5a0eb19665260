"""Template filters of the sweep dashboard's fragments."""
from django import template

register = template.Library()


@register.filter
def sig4(value) -> str:
    """A number with 4 significant digits, "–" when there is none (the dashboard's cells; a decision's reason writes
    its values with the same ``decision_text.value``)."""
    from webapp.sweeps.policies.decision_text import value as written

    if value is None or value == "":
        return "–"
    return written(value)


@register.filter
def prob3(value) -> str:
    """A probability or loss of a decision as its reason writes it (``decision_text.probability``: 3 decimals,
    Python's rounding; Django's floatformat rounds 0.1825 up), "–" when there is none.

    >>> prob3(0.1825), prob3(None)
    ('0.182', '–')
    """
    from webapp.sweeps.policies.decision_text import probability

    if value is None or value == "":
        return "–"
    return probability(value)


@register.filter
def within(value, bounds):
    """``value`` clipped to ``bounds`` ([low, high], a bound None is none; policies.metric_ranges), None kept: a
    stored forecast shown within the metric's range, as the runs table and the chart show it.

    >>> within(-0.42, [0.0, 1.0]), within(0.5, [None, None]), within(None, [0.0, 1.0])
    (0.0, 0.5, None)
    """
    from webapp.sweeps.policies.metric_ranges import clip

    if value is None or value == "" or not bounds:
        return value
    return clip(float(value), tuple(bounds))
