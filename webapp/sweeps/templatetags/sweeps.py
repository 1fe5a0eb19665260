"""Template filters of the sweep dashboard's fragments."""
from django import template

register = template.Library()


@register.filter
def sig4(value) -> str:
    """A number with 4 significant digits, "–" when there is none (the dashboard's cells)."""
    if value is None or value == "":
        return "–"
    return f"{float(value):.4g}"


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
