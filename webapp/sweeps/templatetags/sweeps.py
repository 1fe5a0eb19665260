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
def sig2(value) -> str:
    """A number with 2 significant digits, "–" when there is none (an interval's half-width beside its value).

    >>> sig2(0.0731842), sig2(None)
    ('0.073', '–')
    """
    if value is None or value == "":
        return "–"
    return f"{float(value):.2g}"
